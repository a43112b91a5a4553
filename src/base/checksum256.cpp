#include "base/checksum256.h"

#include <algorithm>
#include <cstddef>

namespace trellis {
namespace {

constexpr uint64_t kMulWord = 0x9E3779B97F4A7C15ULL;   // odd, so multiplying is a bijection
constexpr uint64_t kMulState = 0xC2B2AE3D27D4EB4FULL;  // odd
constexpr uint64_t kLaneSeeds[4] = {0x243F6A8885A308D3ULL, 0x13198A2E03707344ULL,
                                    0xA4093822299F31D0ULL, 0x082EFA98EC4E6C89ULL};
constexpr size_t kStripe = 32;  // one word per lane

uint64_t rotl(uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}

// Little-endian on every host (compilers turn this into one load where the host is).
uint64_t load_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
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

Checksum256 checksum256(std::span<const uint8_t> bytes) {
  uint64_t lane[4] = {kLaneSeeds[0], kLaneSeeds[1], kLaneSeeds[2], kLaneSeeds[3]};
  const uint8_t* p = bytes.data();
  const size_t n_stripes = bytes.size() / kStripe;
  for (size_t s = 0; s < n_stripes; ++s, p += kStripe) {
    for (int i = 0; i < 4; ++i) lane[i] = step(lane[i], load_le64(p + 8 * i));
  }
  // The last partial stripe, zero-padded; the length below tells the padding from real zeros.
  const size_t rest = bytes.size() % kStripe;
  if (rest > 0) {
    uint8_t last[kStripe] = {};
    std::copy(p, p + rest, last);
    for (int i = 0; i < 4; ++i) lane[i] = step(lane[i], load_le64(last + 8 * i));
  }
  const uint64_t length = static_cast<uint64_t>(bytes.size());
  Checksum256 out{};
  for (int i = 0; i < 4; ++i) {
    // Each output word also takes its neighbour lane, so no lane's result stands alone.
    const uint64_t h = avalanche(lane[i] ^ rotl(lane[(i + 1) % 4], 17) ^ (length * kMulWord));
    for (int b = 0; b < 8; ++b)
      out[static_cast<size_t>(8 * i + b)] = static_cast<uint8_t>(h >> (8 * b));
  }
  return out;
}

}  // namespace trellis
