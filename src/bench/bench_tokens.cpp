#include "bench/bench_tokens.h"

namespace trellis::bench {

std::vector<TokenId> bench_tokens(int32_t n, int64_t n_vocab, uint32_t seed) {
  std::vector<TokenId> ids;
  uint32_t state = seed;
  for (int32_t i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    ids.push_back(static_cast<TokenId>(3 + (state >> 8) % static_cast<uint32_t>(n_vocab - 3)));
  }
  return ids;
}

std::string bench_text(const Tokenizer& tokenizer, int32_t n, uint32_t seed) {
  return tokenizer.decode(bench_tokens(n, tokenizer.vocab().size(), seed));
}

}  // namespace trellis::bench
