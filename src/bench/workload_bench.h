// `trellis bench workload NAME`: one of the synthetic workloads of workloads.h, run three times
// on a fresh engine each: with the prefix cache off, on with FCFS admission, on with LPM. Measures
// the cache hit rate (cached prompt tokens / prompt tokens), generation throughput and request
// latency, and checks that the three runs produced the same tokens (greedy, or sampled with fixed
// seeds: the engine's outputs do not depend on the cache, the batch or the admission order).
//
// How each workload is submitted:
//   agents, few-shot  every request at once.
//   multi-turn        the sessions concurrently, each one's turns one after another; turn t + 1's
//                     prompt = turn t's prompt + its output + the next user turn. Latency is per
//                     turn.
//   tree-of-thought   the roots at once; each finished node of depth < d branches into b children
//                     that continue its history (Engine::fork of the finished request), breadth
//                     first. Latency is per node. The cache-off run does not call fork: fork
//                     shares the parent's KV blocks even with the cache off (and counts them as
//                     cached tokens), so that run submits each branch as a request of its own with
//                     the seed fork would give it, which makes it the no-reuse baseline.
//
// With a cache directory in the engine options, two more runs (cache on, FCFS and LPM) have the
// disk tier, in a fresh folder inside that directory (removed afterwards): evicted blocks go to
// disk and come back on a later match, which shows how much of its hit rate a pool too small for
// the workload's prefixes keeps. The other runs have no disk tier. (LPM tends to run a chat's
// next turn while its history is still in memory; FCFS interleaves the sessions, as users who
// take time to answer would.)
//
// reps > 1 runs each configuration reps times after one unrecorded warm-up run; a row then holds
// the means over the repetitions (with the spread of throughput and mean latency) and the latency
// percentiles over all of them.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "base/result.h"
#include "bench/csv.h"
#include "bench/observer.h"
#include "bench/workloads.h"
#include "engine/engine.h"

namespace trellis::bench {

struct WorkloadOptions {
  std::string model_path;
  // The base configuration; each run sets the cache and the admission policy, and the context
  // when left at 0 (max_sequence_tokens).
  EngineConfig engine;
  Workload workload = Workload::AGENTS;
  WorkloadSizes sizes;
  int32_t reps = 1;
};

// Checks the sizes (check_sizes) and reps >= 1, then runs: progress per configuration ("cache
// off", "cache on, fcfs", "cache on, lpm"; reps runs each), each configuration's row as it is done.
// The record: "bench" = "workload", "workload" (its name), the sizes the workload reads,
// "reps", machine, commit, model, "runs" (one row per configuration: "run", token counts,
// "disk_cached_tokens" (of the cached ones, those read from the disk tier), "hit_rate",
// "generation_tokens_per_s", "latency_ms_mean/p50/p99", "wall_ms",
// "scheduler_ms_per_step", and with reps > 1 "reps" and the spreads), "outputs_identical", and
// for tree-of-thought a "note" on the cache-off run. Differing outputs are not an error here.
Result<nlohmann::json> run_workload_bench(const WorkloadOptions& options, const Observer& observer);

// results.csv of a workload record: one row per run (with the spread columns when there were
// repetitions).
CsvTable workload_results_table(const nlohmann::json& record);

}  // namespace trellis::bench
