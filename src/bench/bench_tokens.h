// Deterministic synthetic prompts: every benchmark builds its prompts from these, so a run is
// reproducible and two runs (cache off / on) see the same tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "tokenizer/vocab.h"

namespace trellis::bench {

// n pseudo-random token ids in [3, n_vocab) (the first ids are often control tokens), from a
// linear congruential generator seeded with `seed`: the same (n, n_vocab, seed) always gives the
// same ids, a longer n extends a shorter one, and different seeds give different sequences.
// Precondition: n_vocab > 3.
std::vector<TokenId> bench_tokens(int32_t n, int64_t n_vocab, uint32_t seed = 12345);

}  // namespace trellis::bench
