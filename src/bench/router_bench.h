// `trellis bench router`: a multi-tenant chat workload through the router over R replicas under
// each routing policy, and through one replica alone with the same total KV memory, each run on
// fresh engines (cold caches) in this process, each replica with its own threads.
//
// The workload: G groups of S sessions each; a group's sessions share a long system prompt; each
// session is a conversation of T turns sent one after another (turn k carries the whole
// conversation so far: the system prompt, the user messages and the replies), all sessions at
// once. Measured per run: requests/s, generated tokens/s, hit rate (cached / prompt tokens from
// the replies' usage, so it counts what the replicas really reused), TTFT p50, latency p50 and
// the worst group's p99 (no group starved), and the requests each replica got.
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

struct RouterBenchOptions {
  std::string model_path;
  EngineConfig engine;  // each replica's; the single run gets `replicas` times its KV memory
  int32_t replicas = 2;
  int32_t groups = 4;
  int32_t sessions = 3;  // per group
  int32_t turns = 3;     // per session
  int32_t system_len = 384;
  int32_t user_len = 24;
  int32_t decode_len = 16;
  std::vector<std::string> policies = {"cache-aware", "round-robin", "least-load"};
  bool single = true;  // also the one-replica run
  std::string chat_template = "chatml";  // used when the model has none
};

// Checks the options, then one run per policy and the single run. The record: "bench" =
// "router", the options, machine, commit, model, and "runs" (one row each: "run", "replicas",
// "requests", "requests_per_s", "generation_tokens_per_s", "prompt_tokens", "cached_tokens",
// "hit_rate", "ttft_ms_p50", "latency_ms_p50", "group_latency_ms_p99" (one per group),
// "worst_group_latency_ms_p99",
// "requests_per_replica", "wall_ms").
Result<nlohmann::json> run_router_bench(const RouterBenchOptions& options,
                                        const Observer& observer);

CsvTable router_results_table(const nlohmann::json& record);

}  // namespace trellis::bench
