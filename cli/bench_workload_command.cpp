// `trellis bench workload NAME`: synthetic multi-request workloads, run with the cache off, and
// on under LPM and FCFS admission, reporting cache hit rate, throughput and latency.
//
//   agents   G groups of requests; each group shares a long "tool description" prefix; the
//            requests of the groups arrive interleaved (g0, g1, ..., g0, g1, ...) all at once,
//            so the admission order decides how often a group's prefix is still cached.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_report.h"
#include "bench_support.h"
#include "commands.h"
#include "generator_options.h"

namespace trellis::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct WorkloadArgs {
  GeneratorOptions generator;
  std::string name;
  int32_t n_groups = 4;
  int32_t per_group = 6;
  int32_t prefix_len = 256;
  int32_t suffix_len = 32;
  int32_t decode_len = 16;
  bool json = false;
  std::string out;  // results folder; empty: bench-results/workload-<name>-<timestamp>
};

struct RunFigures {
  std::string label;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  double wall_ms = 0;
  int64_t generated = 0;
  std::vector<double> latencies_ms;
  std::vector<std::vector<TokenId>> outputs;
  double scheduler_ms_per_step = 0;  // the scheduler's own planning cost

  double hit_rate() const {
    return prompt_tokens > 0 ? static_cast<double>(cached_tokens) / prompt_tokens : 0;
  }
};

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto k = static_cast<size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(k, values.size() - 1)];
}

std::vector<EngineRequest> agents_requests(const WorkloadArgs& args, int64_t n_vocab) {
  std::vector<std::vector<TokenId>> prefixes;
  for (int32_t g = 0; g < args.n_groups; ++g)
    prefixes.push_back(bench_tokens(args.prefix_len, n_vocab, 50 + static_cast<uint32_t>(g)));
  std::vector<EngineRequest> requests;
  for (int32_t i = 0; i < args.per_group; ++i) {
    for (int32_t g = 0; g < args.n_groups; ++g) {  // interleaved arrival
      EngineRequest r;
      r.prompt = prefixes[static_cast<size_t>(g)];
      const std::vector<TokenId> own = bench_tokens(
          args.suffix_len, n_vocab, 9000 + static_cast<uint32_t>(i * args.n_groups + g));
      r.prompt.insert(r.prompt.end(), own.begin(), own.end());
      r.max_tokens = args.decode_len;
      r.sampling.temperature = 0;
      r.ignore_eos = true;
      requests.push_back(std::move(r));
    }
  }
  return requests;
}

Result<RunFigures> run_workload(WorkloadArgs& args, const std::string& label, bool cache_on,
                                SchedulePolicy policy) {
  std::unique_ptr<Engine> engine = args.generator.open_engine([&](EngineConfig& config) {
    config.prefix_cache.enabled = cache_on;
    config.scheduler.policy = policy;
    if (config.n_ctx == 0) config.n_ctx = args.prefix_len + args.suffix_len + args.decode_len;
  });
  if (!engine) return Error{"cannot start the engine"};
  std::vector<EngineRequest> requests = agents_requests(args, engine->model().hparams().n_vocab);
  RunFigures figures;
  figures.label = label;
  const Clock::time_point start = Clock::now();
  std::vector<RequestHandle> handles;
  for (EngineRequest& r : requests) {
    Result<RequestHandle> h = engine->submit(std::move(r));
    if (!h.ok()) return h.error();
    handles.push_back(*h);
  }
  for (RequestHandle& h : handles) {
    const RequestOutput& out = h.wait();
    if (out.finish_reason == "error") return Error{out.error};
    figures.prompt_tokens += out.stats.n_prompt_tokens;
    figures.cached_tokens += out.stats.n_cached_tokens;
    figures.generated += out.stats.n_generated_tokens;
    figures.latencies_ms.push_back(out.stats.total_ms);
    figures.outputs.push_back(out.tokens);
  }
  figures.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  const EngineStats stats = engine->stats();
  figures.scheduler_ms_per_step = stats.n_steps > 0 ? stats.scheduler_ms / stats.n_steps : 0;
  return figures;
}

// results.json (everything) and results.csv (one row per run) in the out folder.
Status write_results(const std::string& requested_dir, const std::string& name,
                     const nlohmann::json& record) {
  Result<std::string> dir = prepare_out_dir(requested_dir, name);
  if (!dir.ok()) return dir.error();
  const std::vector<std::string> header = {"run",
                                           "prompt_tokens",
                                           "cached_tokens",
                                           "hit_rate",
                                           "generation_tokens_per_s",
                                           "latency_ms_mean",
                                           "latency_ms_p50",
                                           "latency_ms_p99",
                                           "wall_ms",
                                           "scheduler_ms_per_step"};
  std::vector<std::vector<std::string>> rows;
  for (const nlohmann::json& r : record["runs"]) {
    std::vector<std::string> row = {r["run"].get<std::string>()};
    for (size_t i = 1; i < header.size(); ++i) row.push_back(r[header[i]].dump());
    rows.push_back(std::move(row));
  }
  TRELLIS_TRY(write_file(*dir + "/results.json", record.dump(2) + "\n"));
  TRELLIS_TRY(write_file(*dir + "/results.csv", to_csv(header, rows)));
  std::fprintf(stderr, "results written to %s/ (results.json, results.csv)\n", dir->c_str());
  return {};
}

int run_workload_command(WorkloadArgs& args) {
  if (args.name != "agents") {
    std::fprintf(stderr, "error: unknown workload '%s' (available: agents)\n", args.name.c_str());
    return 1;
  }
  if (args.n_groups <= 0 || args.per_group <= 0 || args.prefix_len <= 0 || args.suffix_len <= 0 ||
      args.decode_len <= 0) {
    std::fprintf(stderr, "error: workload sizes must be positive\n");
    return 1;
  }
  std::vector<RunFigures> runs;
  const struct {
    const char* label;
    bool cache;
    SchedulePolicy policy;
  } variants[] = {{"cache off", false, SchedulePolicy::FCFS},
                  {"cache on, fcfs", true, SchedulePolicy::FCFS},
                  {"cache on, lpm", true, SchedulePolicy::LPM}};
  for (const auto& v : variants) {
    Result<RunFigures> r = run_workload(args, v.label, v.cache, v.policy);
    if (!r.ok()) {
      std::fprintf(stderr, "error: %s\n", r.error().message.c_str());
      return 1;
    }
    runs.push_back(std::move(r).value());
  }
  bool identical = true;
  for (const RunFigures& r : runs) identical &= r.outputs == runs.front().outputs;
  nlohmann::json rows = nlohmann::json::array();
  for (const RunFigures& r : runs) {
    rows.push_back(
        {{"run", r.label},
         {"prompt_tokens", r.prompt_tokens},
         {"cached_tokens", r.cached_tokens},
         {"hit_rate", r.hit_rate()},
         {"generation_tokens_per_s", r.wall_ms > 0 ? r.generated * 1000.0 / r.wall_ms : 0},
         {"latency_ms_mean", stats(r.latencies_ms).mean},
         {"latency_ms_p50", percentile(r.latencies_ms, 0.5)},
         {"latency_ms_p99", percentile(r.latencies_ms, 0.99)},
         {"wall_ms", r.wall_ms},
         {"scheduler_ms_per_step", r.scheduler_ms_per_step}});
  }
  nlohmann::json record = {{"bench", "workload"},           {"workload", args.name},
                           {"groups", args.n_groups},       {"per_group", args.per_group},
                           {"prefix_len", args.prefix_len}, {"suffix_len", args.suffix_len},
                           {"D", args.decode_len},          {"machine", machine_json()},
                           {"commit", source_commit()},     {"runs", rows},
                           {"outputs_identical", identical}};
  Result<nlohmann::json> model = model_file_json(args.generator.model);
  record["model"] = model.ok() ? *model : nlohmann::json{{"path", args.generator.model}};
  if (Status written = write_results(args.out, "workload-" + args.name, record); !written.ok()) {
    std::fprintf(stderr, "error: %s\n", written.error().message.c_str());
    return 1;
  }
  if (args.json) {
    std::printf("%s\n", record.dump().c_str());
  } else {
    std::printf(
        "workload %s: %d groups x %d requests, prefix %d + suffix %d tokens, D=%d, model %s\n",
        args.name.c_str(), args.n_groups, args.per_group, args.prefix_len, args.suffix_len,
        args.decode_len, args.generator.model.c_str());
    std::printf(
        "| run | hit rate | cached / prompt tokens | gen tokens/s | latency mean | p50 | p99 | "
        "scheduler ms/step |\n|---|---|---|---|---|---|---|---|\n");
    for (const nlohmann::json& row : rows) {
      std::printf("| %s | %.3f | %lld / %lld | %.2f | %.0f ms | %.0f ms | %.0f ms | %.3f |\n",
                  row["run"].get<std::string>().c_str(), row["hit_rate"].get<double>(),
                  row["cached_tokens"].get<long long>(), row["prompt_tokens"].get<long long>(),
                  row["generation_tokens_per_s"].get<double>(),
                  row["latency_ms_mean"].get<double>(), row["latency_ms_p50"].get<double>(),
                  row["latency_ms_p99"].get<double>(), row["scheduler_ms_per_step"].get<double>());
    }
    std::printf("outputs: %s\n", identical ? "identical" : "DIFFERENT");
  }
  if (!identical) {
    std::fprintf(stderr, "error: outputs differ between the runs\n");
    return 1;
  }
  return 0;
}

}  // namespace

void add_bench_workload_command(CLI::App& bench, int& exit_code) {
  CLI::App* cmd = bench.add_subcommand(
      "workload", "A synthetic multi-request workload: cache off, on with FCFS, on with LPM");
  auto args = std::make_shared<WorkloadArgs>();
  args->generator.add_to(*cmd, /*model_required=*/false);
  args->generator.add_scheduler_options(*cmd);
  cmd->add_option("name", args->name, "Workload: agents")->required();
  cmd->add_option("--groups", args->n_groups, "Prefix groups")->capture_default_str();
  cmd->add_option("--per-group", args->per_group, "Requests per group")->capture_default_str();
  cmd->add_option("--prefix-len", args->prefix_len, "Shared prefix tokens per group")
      ->capture_default_str();
  cmd->add_option("--suffix-len", args->suffix_len, "Own tokens per request")
      ->capture_default_str();
  cmd->add_option("-D", args->decode_len, "Tokens generated per request")->capture_default_str();
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->add_option("--out", args->out,
                  "Folder for results.json and results.csv (default bench-results/workload-...)");
  cmd->callback([&exit_code, args] { exit_code = run_workload_command(*args); });
}

}  // namespace trellis::cli
