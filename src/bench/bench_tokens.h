// Deterministic synthetic prompts: every benchmark builds its prompts from these, so a run is
// reproducible and two runs (cache off / on) see the same tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace trellis::bench {

// n pseudo-random token ids in [3, n_vocab) (the first ids are often control tokens), from a
// linear congruential generator seeded with `seed`: the same (n, n_vocab, seed) always gives the
// same ids, a longer n extends a shorter one, and different seeds give different sequences.
// Precondition: n_vocab > 3.
std::vector<TokenId> bench_tokens(int32_t n, int64_t n_vocab, uint32_t seed = 12345);

// The text of bench_tokens(n, ...) in `tokenizer`'s vocabulary, for prompts sent as text (the
// HTTP benches): stable across runs, it tokenizes back to about n tokens.
std::string bench_text(const Tokenizer& tokenizer, int32_t n, uint32_t seed);

}  // namespace trellis::bench
