// The record checksum: it must notice every single-bit flip, a moved or swapped word, a changed
// length, and stay the same from one build to the next (it is part of the disk format).
#include "base/checksum256.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace trellis {
namespace {

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

std::string hex(const Checksum256& c) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : c) {
    s.push_back(digits[b >> 4]);
    s.push_back(digits[b & 15]);
  }
  return s;
}

TEST(Checksum256Test, EverySingleBitFlipChangesIt) {
  for (size_t n : {1u, 7u, 31u, 32u, 33u, 100u, 257u}) {
    std::vector<uint8_t> data = random_bytes(n, static_cast<uint32_t>(n));
    const Checksum256 original = checksum256(data);
    for (size_t byte = 0; byte < n; ++byte) {
      for (int bit = 0; bit < 8; ++bit) {
        data[byte] ^= static_cast<uint8_t>(1 << bit);
        EXPECT_NE(checksum256(data), original) << n << " " << byte << " " << bit;
        data[byte] ^= static_cast<uint8_t>(1 << bit);
      }
    }
    EXPECT_EQ(checksum256(data), original);  // deterministic
  }
}

TEST(Checksum256Test, SwappedWordsAndZeroPaddingChangeIt) {
  std::vector<uint8_t> data = random_bytes(256, 1);
  const Checksum256 original = checksum256(data);
  // Two 8-byte words of the same lane (32 bytes apart), then of neighbouring lanes.
  for (size_t other : {32u, 8u}) {
    std::vector<uint8_t> swapped = data;
    std::swap_ranges(swapped.begin(), swapped.begin() + 8, swapped.begin() + other);
    EXPECT_NE(checksum256(swapped), original) << other;
  }
  // A trailing zero byte is not the same input as none (the tail is zero-padded internally).
  std::vector<uint8_t> longer = data;
  longer.push_back(0);
  EXPECT_NE(checksum256(longer), original);
  EXPECT_NE(checksum256(std::vector<uint8_t>(3, 0)), checksum256(std::vector<uint8_t>(4, 0)));
}

TEST(Checksum256Test, DistinctInputsGiveDistinctSums) {
  std::set<Checksum256> seen;
  for (uint32_t i = 0; i < 2000; ++i) seen.insert(checksum256(random_bytes(1 + i % 97, i)));
  EXPECT_EQ(seen.size(), 2000u);
}

TEST(Checksum256Test, PiecesGiveTheSumOfTheWhole) {
  // Cuts at every offset of a few sizes, including pieces that end inside a stripe and empty
  // pieces: the builder must carry an unfinished stripe over.
  for (size_t n : {0u, 1u, 31u, 32u, 33u, 100u, 220u}) {
    const std::vector<uint8_t> data = random_bytes(n, static_cast<uint32_t>(n));
    const Checksum256 whole = checksum256(data);
    for (size_t cut = 0; cut <= n; ++cut) {
      for (size_t cut2 = cut; cut2 <= n; cut2 += 7) {
        Checksum256Builder b;
        b.update(std::span(data).first(cut));
        b.update(std::span(data).subspan(cut, cut2 - cut));
        b.update(std::span(data).subspan(cut2));
        EXPECT_EQ(b.finish(), whole) << n << " " << cut << " " << cut2;
      }
    }
  }
}

TEST(Checksum256Test, IsStableAcrossBuilds) {
  // Records written by one build are verified by the next: the function is part of the format
  // (kvdisk/block_record.h). Changing it needs a new format version and a new value here.
  std::vector<uint8_t> counting(100);
  for (size_t i = 0; i < counting.size(); ++i) counting[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(hex(checksum256(counting)),
            "08717d977f8fee81e6ef4eecbcd10f6800f4c028f8f432a13a1a64145737caf4");
}

}  // namespace
}  // namespace trellis
