// `trellis bench block-size`: what the KV block size B costs and buys the prefix cache when
// prompts share prefixes that end inside blocks.
//
// For each length L a fixed set of prompts (the same for every B and mode, block_size_prompts):
//   warm set: n_prompts prompts of L tokens forming a tree. Prompt 0 is random; prompt i copies
//             the first d tokens of an earlier prompt and continues with its own tokens, d odd
//             and so never a multiple of any even B.
//   probes:   n_probes prompts of L tokens; probe q copies the first s tokens of warm prompt
//             q mod n_prompts (s odd, in [L/2, L - 3]) and continues with its own.
//   Divergence inside a block is where the two match modes differ: TOKEN mode splits the tree
//   there and reuses every matched token (copying the partial block); BLOCK mode reuses whole
//   blocks only, so a probe loses up to B - 1 tokens.
// One op (B, mode, L): a fresh engine with block size B and that match mode, the warm set cached
// one prompt after another (not timed), the radix tree's leaves counted, then the probes run one
// after another (max_tokens 1) and their TTFT and cached tokens recorded. A cache-off op per
// (B, L) gives the baseline. One untimed op first pages the weights in.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"
#include "bench/csv.h"
#include "bench/observer.h"
#include "engine/engine.h"

namespace trellis::bench {

struct BlockSizeOptions {
  std::string model_path;
  // The base configuration; each op sets the block size, the match mode, the cache and a pool
  // large enough that nothing is evicted (so leaves and hits do not depend on the pool size).
  EngineConfig engine;
  std::vector<int32_t> block_sizes = {8, 16, 32, 64, 128};
  // Not multiples of the larger block sizes: like real prompts, their last block is partial,
  // which BLOCK mode does not cache.
  std::vector<int32_t> lengths = {120, 250, 500};
  int32_t n_prompts = 8;  // warm set size
  int32_t n_probes = 4;   // N
  int32_t reps = 2;
};

// The prompts of one length (see the file comment); deterministic for (L, counts, n_vocab).
struct BlockSizePrompts {
  std::vector<std::vector<TokenId>> warm;    // [n_prompts][L]
  std::vector<std::vector<TokenId>> probes;  // [n_probes][L]
  std::vector<int32_t> probe_shared;         // tokens probe q shares with its warm prompt
};
// Preconditions: L >= 8, n_prompts >= 1, n_probes >= 0, n_vocab > 4.
BlockSizePrompts block_size_prompts(int32_t L, int32_t n_prompts, int32_t n_probes,
                                    int64_t n_vocab);

// Checks the options (positive counts, block sizes and lengths given, each length >= 8), runs one
// untimed op, then every block size: progress per B ("B=16", 3 modes x lengths x reps ops), and a
// summary row per (B, mode) as soon as that B is done. The record: "bench" = "block-size", the
// options, machine, commit, model, "points" (one per (B, mode, L): means and spreads over reps)
// and "summary" (one per (B, mode): "leaves_mean/stddev", "cached_tokens_mean",
// "shared_tokens_mean", "ttft_ms_mean/stddev" over lengths and reps).
Result<nlohmann::json> run_block_size_bench(const BlockSizeOptions& options,
                                            const Observer& observer);

// results.csv of a block-size record: one row per (B, mode, L) point.
CsvTable block_size_results_table(const nlohmann::json& record);

}  // namespace trellis::bench
