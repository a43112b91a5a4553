// `trellis bench speed`: prompt processing and generation throughput, as llama-bench's pp and tg
// measure them, through the engine that serves every request.
//
// One engine with the prefix cache off (every repetition computes its whole prompt) and a batch
// large enough for the prompt in one chunk. Per repetition: pp = one request of n_prompt tokens
// that generates one token (prompt tokens / prefill time); tg = one request of a one-token prompt
// that generates n_gen + 1 tokens (n_gen decode steps / decode time). A first, uncounted
// repetition warms caches and page-ins.
//
// Batched (as llama-batched-bench with a shared prompt), for each batch size N: one request of
// n_prompt tokens forked into N sequences (Engine::fork: the prompt is prefilled once and its
// blocks shared), each generating n_gen + 1 tokens, all decoding in the same steps. Reported as
// aggregate rates: prefill n_prompt / prefill time, decode N * n_gen / decode time (first token
// to the last sequence's end). N = 1 goes the same way, so the rows compare with each other.
//
// At depth (as llama-bench -p 0 -d D), for each depth D: tg after a context of D tokens, i.e. one
// request whose prompt is those D tokens, generating n_gen + 1. The prefix cache is on for this
// measurement, so the context is computed once (in the uncounted first repetition) and every
// repetition after it decodes over the D cached tokens, as a chat deep into its history does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "bench/observer.h"
#include "bench/stats.h"
#include "engine/engine.h"

namespace trellis::bench {

struct SpeedOptions {
  std::string model_path;
  // The base configuration; the run turns the prefix cache off, raises the batch to n_prompt and,
  // when it is 0, sets the context to max(n_prompt, n_gen + 1).
  EngineConfig engine;
  int32_t n_prompt = 512;
  int32_t n_gen = 128;
  int32_t reps = 3;
  // Empty: pp and tg as above. Otherwise the batched measurement for each N (all >= 1).
  std::vector<int32_t> batch_sizes;
  // Non-empty: tg at each of these context depths instead (all >= 1; not with batch_sizes).
  std::vector<int32_t> depths;
};

// One batch size of the batched measurement, aggregate tokens/s over reps.
struct BatchSpeed {
  int32_t n_sequences = 0;
  Stats prompt_tokens_per_s;
  Stats generation_tokens_per_s;
  double prefill_ms = 0;  // means over reps
  double decode_ms = 0;
};

// tg at one context depth, over reps.
struct DepthSpeed {
  int32_t depth = 0;
  Stats generation_tokens_per_s;
};

struct SpeedResult {
  Stats prompt_tokens_per_s;        // over reps
  Stats generation_tokens_per_s;    // over reps
  std::vector<BatchSpeed> batches;  // batched: one per batch size (pp and tg are then unset)
  std::vector<DepthSpeed> depths;   // at depth: one per depth (pp and tg are then unset)
  int n_threads = 0;
  size_t kv_cache_bytes = 0;
  // The most KV memory the requests held at once (EngineStats::peak_kv_bytes_in_use), and the
  // token positions it was for: the prompt (pp), the deepest context and its generated tokens (at
  // depth), the prompt and every sequence's generated tokens (batched).
  size_t kv_peak_bytes = 0;
  int64_t kv_peak_tokens = 0;
};

// Errors: a size that is not positive, the engine, a failed request. Progress: stage "speed",
// reps + 1 repetitions (per batch size when batched).
Result<SpeedResult> run_speed_bench(const SpeedOptions& options, const Observer& observer);

}  // namespace trellis::bench
