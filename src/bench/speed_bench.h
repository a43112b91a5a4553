// `trellis bench speed`: prompt processing and generation throughput, as llama-bench's pp and tg
// measure them, through the engine that serves every request.
//
// One engine with the prefix cache off (every repetition computes its whole prompt) and a batch
// large enough for the prompt in one chunk. Per repetition: pp = one request of n_prompt tokens
// that generates one token (prompt tokens / prefill time); tg = one request of a one-token prompt
// that generates n_gen + 1 tokens (n_gen decode steps / decode time). A first, uncounted
// repetition warms caches and page-ins.
#pragma once

#include <cstdint>
#include <string>

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
};

struct SpeedResult {
  Stats prompt_tokens_per_s;      // over reps
  Stats generation_tokens_per_s;  // over reps
  int n_threads = 0;
  size_t kv_cache_bytes = 0;
};

// Errors: a size that is not positive, the engine, a failed request. Progress: stage "speed",
// reps + 1 repetitions.
Result<SpeedResult> run_speed_bench(const SpeedOptions& options, const Observer& observer);

}  // namespace trellis::bench
