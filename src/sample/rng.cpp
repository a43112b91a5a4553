#include "sample/rng.h"

namespace trellis {
namespace {

uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

}  // namespace

uint64_t splitmix64_next(uint64_t& state) {
  state += 0x9E3779B97F4A7C15ull;
  uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t derive_seed(uint64_t seed, uint64_t index) {
  if (index == 0) return seed;
  // Mixing the index first keeps (seed, index) and (seed + 1, index - 1) unrelated.
  uint64_t mix = index;
  uint64_t state = seed ^ splitmix64_next(mix);
  return splitmix64_next(state);
}

void Rng::reseed(uint64_t seed) {
  uint64_t state = seed;
  for (uint64_t& word : state_) word = splitmix64_next(state);
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(state_[1] * 5, 7) * 9;
  const uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = rotl(state_[3], 45);
  return result;
}

}  // namespace trellis
