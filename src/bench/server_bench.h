// `trellis bench server`: the HTTP server under concurrent chat clients that share a system
// prompt, with the prefix cache off and on (a fresh engine and server each, one run).
//
// Each of `clients` threads sends `requests` streaming chat requests one after another over
// loopback (http_load_client.h): the same system message (system_len tokens of text), a user
// message of its own, greedy, D tokens. One untimed request first pages the weights in. Measured
// per run: requests/s, TTFT and latency p50/p99, cached / prompt tokens (from each response's
// usage), and whether both runs produced the same texts.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "base/result.h"
#include "bench/csv.h"
#include "bench/observer.h"
#include "engine/engine.h"

namespace trellis::bench {

struct ServerBenchOptions {
  std::string model_path;
  EngineConfig engine;  // the base configuration; each run sets the cache off or on
  int32_t clients = 16;
  int32_t requests = 2;  // per client
  int32_t system_len = 256;
  int32_t user_len = 24;
  int32_t decode_len = 16;
  std::string chat_template = "chatml";  // used when the model has none
};

// Checks the sizes (all positive), then runs cache off and cache on: progress per run ("cache
// off", "cache on"; one unit per request), each run's row as it is done. The record: "bench" =
// "server", the options, machine, commit, model, "runs" (one row per run: "run", "requests",
// "requests_per_s", "ttft_ms_mean/p50/p99", "latency_ms_p50/p99", token counts, "hit_rate",
// "generation_tokens_per_s", "wall_ms") and "outputs_identical". Differing texts are not an
// error here.
Result<nlohmann::json> run_server_bench(const ServerBenchOptions& options,
                                        const Observer& observer);

// results.csv of a server record: one row per run.
CsvTable server_results_table(const nlohmann::json& record);

}  // namespace trellis::bench
