// A small seeded random number generator whose output is the same on every platform and standard
// library: xoshiro256** (Blackman & Vigna) seeded through splitmix64, plus our own conversion to a
// uniform double. std:: distributions are deliberately not used, since their algorithms are
// implementation-defined and would make a fixed seed give different tokens on libstdc++ and libc++.
#pragma once

#include <cstdint>

namespace trellis {

// One step of splitmix64: advances `state` and returns a well-mixed 64-bit value. Used to expand
// a 64-bit seed into xoshiro's 256-bit state and to derive independent seeds.
uint64_t splitmix64_next(uint64_t& state);

// The seed of the `index`-th of several parallel samples drawn for one request with `seed`
// (OpenAI's `n` > 1). Index 0 keeps `seed` itself, so n = 1 behaves as if the seed were used
// directly; other indices give unrelated, reproducible streams.
uint64_t derive_seed(uint64_t seed, uint64_t index);

class Rng {
 public:
  explicit Rng(uint64_t seed) { reseed(seed); }

  // Restarts the stream: the same seed always yields the same sequence.
  void reseed(uint64_t seed);

  // Next 64 uniformly distributed bits.
  uint64_t next_u64();

  // Uniform in [0, 1), with 53 random bits (every representable multiple of 2^-53).
  double next_double() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_[4];  // never all zero (splitmix64 cannot produce four zero words in a row)
};

}  // namespace trellis
