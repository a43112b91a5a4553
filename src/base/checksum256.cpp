#include "base/checksum256.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>

namespace trellis {
namespace {

constexpr uint64_t kMulWord = 0x9E3779B97F4A7C15ULL;   // odd, so multiplying is a bijection
constexpr uint64_t kMulState = 0xC2B2AE3D27D4EB4FULL;  // odd
constexpr uint64_t kLaneSeeds[4] = {0x243F6A8885A308D3ULL, 0x13198A2E03707344ULL,
                                    0xA4093822299F31D0ULL, 0x082EFA98EC4E6C89ULL};

uint64_t rotl(uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}

// Little-endian on every host: one load, byte-swapped where the host is big-endian.
uint64_t load_le64(const uint8_t* p) {
  uint64_t v = 0;
  std::memcpy(&v, p, sizeof(v));
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}

uint64_t step(uint64_t h, uint64_t word) {
  return rotl(h ^ (word * kMulWord), 29) * kMulState;
}

// Spreads every input bit over the whole word (each step is a bijection).
uint64_t avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDULL;
  h ^= h >> 29;
  h *= 0xC4CEB9FE1A85EC53ULL;
  h ^= h >> 32;
  return h;
}

}  // namespace

Checksum256Builder::Checksum256Builder()
    : lane_{kLaneSeeds[0], kLaneSeeds[1], kLaneSeeds[2], kLaneSeeds[3]} {}

void Checksum256Builder::update(std::span<const uint8_t> bytes) {
  length_ += bytes.size();
  const uint8_t* p = bytes.data();
  size_t n = bytes.size();
  if (n_pending_ > 0) {  // complete the stripe the last piece began
    const size_t take = std::min(n, kStripe - n_pending_);
    std::copy(p, p + take, pending_ + n_pending_);
    n_pending_ += take;
    p += take;
    n -= take;
    if (n_pending_ < kStripe) return;
    for (int i = 0; i < 4; ++i) lane_[i] = step(lane_[i], load_le64(pending_ + 8 * i));
    n_pending_ = 0;
  }
  // The lanes in locals, so that they stay in registers: four independent chains.
  uint64_t l0 = lane_[0], l1 = lane_[1], l2 = lane_[2], l3 = lane_[3];
  for (; n >= kStripe; p += kStripe, n -= kStripe) {
    l0 = step(l0, load_le64(p));
    l1 = step(l1, load_le64(p + 8));
    l2 = step(l2, load_le64(p + 16));
    l3 = step(l3, load_le64(p + 24));
  }
  lane_[0] = l0, lane_[1] = l1, lane_[2] = l2, lane_[3] = l3;
  std::copy(p, p + n, pending_);
  n_pending_ = n;
}

Checksum256 Checksum256Builder::finish() const {
  uint64_t lane[4] = {lane_[0], lane_[1], lane_[2], lane_[3]};
  // The last partial stripe, zero-padded; the length below tells the padding from real zeros.
  if (n_pending_ > 0) {
    uint8_t last[kStripe] = {};
    std::copy(pending_, pending_ + n_pending_, last);
    for (int i = 0; i < 4; ++i) lane[i] = step(lane[i], load_le64(last + 8 * i));
  }
  Checksum256 out{};
  for (int i = 0; i < 4; ++i) {
    // Each output word also takes its neighbour lane, so no lane's result stands alone.
    const uint64_t h = avalanche(lane[i] ^ rotl(lane[(i + 1) % 4], 17) ^ (length_ * kMulWord));
    for (int b = 0; b < 8; ++b)
      out[static_cast<size_t>(8 * i + b)] = static_cast<uint8_t>(h >> (8 * b));
  }
  return out;
}

Checksum256 checksum256(std::span<const uint8_t> bytes) {
  Checksum256Builder builder;
  builder.update(bytes);
  return builder.finish();
}

}  // namespace trellis
