// `trellis bench phi` and `bench ttft`: what the prefix cache saves as the shared-prefix fraction
// φ grows.
//
// For each φ: prefix_blocks = round(φ·L/B) blocks of shared "system prompt" (φ "max": every block
// but the last), then N sessions of L prompt tokens each (the shared prefix + their own suffix)
// that generate D tokens. One op = a fresh engine, the shared prefix warmed into the cache (cache
// on only; not timed), then the N sessions submitted at once (sequential: one after another).
// Cache off and cache on run in the same process, point by point, and their outputs are compared
// token for token. `bench ttft` is the same sweep with one session of D = 1 per op.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"
#include "bench/csv.h"
#include "bench/observer.h"
#include "engine/engine.h"

namespace trellis::bench {

struct PhiOptions {
  std::string model_path;
  // The base configuration; each op sets the cache on or off, and when left at 0 the context
  // (L + D) and the pool (room for every session at once, so nothing is preempted); it raises
  // max_seqs to N. engine.block_size is B.
  EngineConfig engine;
  std::string bench = "phi";  // the record's name: "phi" or "ttft"
  int32_t prompt_len = 512;   // L
  int32_t decode_len = 64;    // D
  int32_t n_sessions = 4;     // N
  std::string phi_list = "0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,max";  // see parse_phi_points
  int32_t reps = 1;         // ops per point and cache mode
  bool sequential = false;  // sessions one after another instead of all at once
  // The process's heap allocation counter (operator new calls so far); empty: not counted (0).
  // An op's "heap_allocations" counts from its first submission to its last session's end (the
  // engine's start and the warm-up are left out): the serving's own, O(sessions).
  std::function<int64_t()> heap_allocations;
};

// One φ value of the sweep, quantized to whole blocks.
struct PhiPoint {
  std::string label;  // as given
  int32_t prefix_blocks = 0;
  int32_t prefix_tokens = 0;  // prefix_blocks * B
  double effective_phi = 0;   // prefix_tokens / L
};

// The points of a comma-separated list of numbers in [0, 1] and "max" (every block but the
// last). A prefix never covers the prompt's last token: prefix_blocks <= (L - 1) / B.
// Errors name the bad item. Preconditions: L > 0, B > 0.
Result<std::vector<PhiPoint>> parse_phi_points(const std::string& list, int32_t prompt_len,
                                               int32_t block_size);

// The highest cache hit rate a session can reach: it diverges in its last block at best, so
// (ceil(L/B) - 1) / ceil(L/B).
double max_hit_rate(int32_t prompt_len, int32_t block_size);

// Checks the sizes (L, D, N, B, reps positive) and the φ list, runs one untimed op (page-in), then
// every point: reps ops with the cache off and on each (alternating which goes first).
// Reports progress per point ("phi LABEL", 2·reps ops) and each point's row as it is done. The
// record: the options, machine, commit, model and "points" (one row per point: "phi",
// "effective_phi", "prefix_blocks", "shared_tokens", "cache_off"/"cache_on" figures (means and
// stddevs over reps), "outputs_identical"). Errors: bad sizes, the engine, a failed request.
// Outputs that differ are not an error here: the caller checks "outputs_identical".
Result<nlohmann::json> run_phi_bench(const PhiOptions& options, const Observer& observer);

// results.csv of a phi / ttft record: one row per point and cache mode.
CsvTable phi_results_table(const nlohmann::json& record);

}  // namespace trellis::bench
