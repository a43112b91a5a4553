// `trellis bench workload NAME`: flags, then bench/workload_bench.h's three runs (cache off, on
// with FCFS, on with LPM) of one synthetic workload (bench/workloads.h), printed as a table and
// saved as results.json / results.csv.
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/workload_bench.h"
#include "bench_common.h"
#include "commands.h"
#include "engine_options.h"

namespace trellis::cli {
namespace {

struct WorkloadArgs {
  EngineOptions engine;
  std::string name;
  bench::WorkloadOptions options;  // sizes and reps; model, engine and workload are set at run
  bool json = false;
  std::string out;  // results folder; empty: bench-results/workload-<name>-<timestamp>
};

void print_table(const WorkloadArgs& args, const nlohmann::json& rows) {
  const bench::WorkloadOptions& o = args.options;
  std::printf("workload %s: %s, model %s\n", args.name.c_str(),
              bench::describe(o.workload, o.sizes).c_str(), o.model_path.c_str());
  if (o.reps > 1) {
    std::printf("%d repetitions after a warm-up run: means, +- sample standard deviation\n",
                o.reps);
  }
  std::printf(
      "| run | hit rate | cached / prompt tokens | from disk | gen tokens/s | latency mean | p50 | "
      "p99 | scheduler ms/step |\n|---|---|---|---|---|---|---|---|---|\n");
  for (const nlohmann::json& row : rows) {
    char spread[64] = "";
    if (row.contains("reps")) {
      std::snprintf(spread, sizeof spread, " +- %.2f",
                    row["generation_tokens_per_s_stddev"].get<double>());
    }
    std::printf(
        "| %s | %.3f | %lld / %lld | %lld | %.2f%s | %.0f ms | %.0f ms | %.0f ms | %.3f |\n",
        row["run"].get<std::string>().c_str(), row["hit_rate"].get<double>(),
        row["cached_tokens"].get<long long>(), row["prompt_tokens"].get<long long>(),
        row["disk_cached_tokens"].get<long long>(), row["generation_tokens_per_s"].get<double>(),
        spread, row["latency_ms_mean"].get<double>(), row["latency_ms_p50"].get<double>(),
        row["latency_ms_p99"].get<double>(), row["scheduler_ms_per_step"].get<double>());
  }
}

int run_workload_command(WorkloadArgs& args) {
  if (!args.engine.join_pipeline()) return 1;  // other ranks run their stage and exit here
  bench::WorkloadOptions& options = args.options;
  const std::optional<bench::Workload> workload = bench::parse_workload(args.name);
  if (!workload) {
    return print_error("unknown workload '" + args.name +
                       "' (available: " + bench::workload_names() + ")");
  }
  options.workload = *workload;
  if (!resolve_engine(args.engine, options.model_path, options.engine)) return 1;

  const auto start = std::chrono::steady_clock::now();
  ProgressPrinter progress;
  Result<nlohmann::json> record = bench::run_workload_bench(options, progress.observer());
  if (!record.ok()) return print_error(record.error().message);
  (*record)["stages"] = stage_stats_json(options.engine.pipeline);
  print_stage_stats(
      options.engine.pipeline,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (!save_results(args.out, "workload-" + args.name, *record,
                    bench::workload_results_table(*record))
           .ok()) {
    return 1;
  }
  const bool identical = (*record)["outputs_identical"].get<bool>();
  if (args.json) {
    std::printf("%s\n", record->dump().c_str());
  } else {
    print_table(args, (*record)["runs"]);
    if (record->contains("note"))
      std::printf("note: %s\n", (*record)["note"].get<std::string>().c_str());
    std::printf("outputs: %s\n", identical ? "identical" : "DIFFERENT");
  }
  if (!identical) return print_error("outputs differ between the runs");
  return 0;
}

}  // namespace

void add_bench_workload_command(CLI::App& bench, int& exit_code) {
  CLI::App* cmd = bench.add_subcommand(
      "workload",
      "A synthetic multi-request workload (agents, few-shot, multi-turn, tree-of-thought): cache "
      "off, on with FCFS, on with LPM");
  auto args = std::make_shared<WorkloadArgs>();
  bench::WorkloadSizes& s = args->options.sizes;
  args->engine.add_to(*cmd, /*model_required=*/false);
  args->engine.add_pipeline_options(*cmd);
  args->engine.add_scheduler_options(*cmd);
  args->engine.add_disk_tier_options(*cmd);
  cmd->add_option("name", args->name, "Workload: " + bench::workload_names())->required();
  cmd->add_option("--prefix-len", s.prefix_len,
                  "Shared prefix tokens: agents, per group; multi-turn and tree-of-thought, the "
                  "system prompt")
      ->capture_default_str();
  cmd->add_option("--suffix-len", s.suffix_len,
                  "Own tokens per request: agents' task, few-shot question, multi-turn user "
                  "turn, tree-of-thought question")
      ->capture_default_str();
  cmd->add_option("-D", s.decode_len, "Tokens generated per request (chat turn, tree node)")
      ->capture_default_str();
  cmd->add_option("--groups", s.n_groups, "agents: prefix groups")->capture_default_str();
  cmd->add_option("--per-group", s.per_group, "agents: requests per group")->capture_default_str();
  cmd->add_option("--shots", s.n_shots, "few-shot: example blocks in the shared prefix")
      ->capture_default_str();
  cmd->add_option("--shot-len", s.shot_len, "few-shot: tokens per example")->capture_default_str();
  cmd->add_option("--questions", s.n_questions, "few-shot: questions, submitted at once")
      ->capture_default_str();
  cmd->add_option("--sessions", s.n_sessions, "multi-turn: concurrent chat sessions")
      ->capture_default_str();
  cmd->add_option("--turns", s.n_turns, "multi-turn: turns per session, one after another")
      ->capture_default_str();
  cmd->add_option("--trees", s.n_trees, "tree-of-thought: root questions, one tree each")
      ->capture_default_str();
  cmd->add_option("--depth", s.depth, "tree-of-thought: levels below the root")
      ->capture_default_str();
  cmd->add_option("--branch", s.branch, "tree-of-thought: children per node")
      ->capture_default_str();
  cmd->add_option("--temp", s.temperature, "tree-of-thought: sampling temperature (> 0)")
      ->capture_default_str();
  cmd->add_option("--seed", s.seed, "tree-of-thought: sampling seed")->capture_default_str();
  cmd->add_option("--reps", args->options.reps,
                  "Runs per configuration (more than 1: after a warm-up run, with spread)")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->add_option("--out", args->out,
                  "Folder for results.json and results.csv (default bench-results/workload-...)");
  cmd->callback([&exit_code, args] { exit_code = run_workload_command(*args); });
}

}  // namespace trellis::cli
