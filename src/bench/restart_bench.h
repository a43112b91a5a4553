// `trellis bench restart`: what the prefix cache's disk tier saves across a restart. A long
// system prompt (1,500 tokens by default) followed by a short question, timed to the first token
// three ways, on a fresh cache directory per repetition:
//
//   cold  engine 1, nothing cached:            system + question A is computed whole
//   hot   engine 1, the system prompt cached:  system + question B reuses it from memory
//         (engine 1 ends: what it cached goes to the disk tier)
//   warm  engine 2, a fresh process's pool:    system + question C loads it from disk
//
// and checks exactness: engine 2 then answers system + question A with the tokens engine 1 gave.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "base/result.h"
#include "bench/observer.h"
#include "bench/stats.h"
#include "engine/engine.h"

namespace trellis::bench {

struct RestartOptions {
  std::string model_path;
  EngineConfig engine;      // the prefix cache on; cache_dir set (wiped before each repetition)
  int32_t n_system = 1500;  // system prompt tokens
  int32_t n_question = 16;  // question tokens
  int32_t n_gen = 8;        // generated tokens per request
  int32_t reps = 3;
};

struct RestartPhase {
  Stats ttft_ms;
  double cached_tokens = 0;       // mean over reps
  double disk_cached_tokens = 0;  // mean over reps
  double disk_load_ms = 0;        // mean over reps
};

struct RestartResult {
  RestartPhase cold, hot, warm;
  bool outputs_match = true;  // engine 2 reproduced engine 1's tokens every time
};

// Errors: bad sizes, a missing cache dir, the engine, a failed request. Progress: stage
// "restart", reps.
Result<RestartResult> run_restart_bench(const RestartOptions& options, const Observer& observer);

// The record's "results" part.
nlohmann::json restart_result_json(const RestartResult& result);

}  // namespace trellis::bench
