// Small helpers shared by the `trellis bench` commands.
#pragma once

#include <cstdint>
#include <vector>

#include "tokenizer/vocab.h"

namespace trellis::cli {

struct Stats {
  double mean = 0;
  double stddev = 0;  // sample standard deviation; 0 for fewer than two values
};
Stats stats(const std::vector<double>& values);

// The value at fraction p in [0, 1] of the sorted values (nearest rank); 0 when empty.
double percentile(std::vector<double> values, double p);

uint64_t peak_rss_bytes();

// Heap allocations (operator new) made by the process so far (see alloc_hook.cpp).
int64_t heap_allocations();

// n deterministic pseudo-random token ids in [3, n_vocab) (the first ids are often control
// tokens); different seeds give different sequences.
std::vector<TokenId> bench_tokens(int32_t n, int64_t n_vocab, uint32_t seed = 12345);

}  // namespace trellis::cli
