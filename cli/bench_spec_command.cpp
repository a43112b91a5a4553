// `trellis bench spec`: decode tokens/s with speculative decoding on and off, on workloads whose
// drafts hit (regenerate, agent), are seldom found (miss) or hardly exist (free), measured by
// bench/spec_bench.h, with how many drafted tokens were kept.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "bench/results.h"
#include "bench/spec_bench.h"
#include "bench_common.h"
#include "commands.h"
#include "engine_options.h"

namespace trellis::cli {
namespace {

struct SpecArgs {
  EngineOptions engine;
  bench::SpecBenchOptions options;
  std::string out;
  bool json = false;
  bool workloads_given = false;
};

nlohmann::json row_json(const bench::SpecRow& r) {
  const double generated = static_cast<double>(std::max<int64_t>(1, r.n_generated));
  return {{"workload", r.workload},
          {"batch", r.batch},
          {"off_tokens_per_s", r.off_tokens_per_s.mean},
          {"off_tokens_per_s_stddev", r.off_tokens_per_s.stddev},
          {"on_tokens_per_s", r.on_tokens_per_s.mean},
          {"on_tokens_per_s_stddev", r.on_tokens_per_s.stddev},
          {"speedup", r.speedup.mean},
          {"speedup_stddev", r.speedup.stddev},
          {"drafted_tokens", r.n_drafted},
          {"accepted_tokens", r.n_accepted},
          {"acceptance", r.n_drafted > 0 ? static_cast<double>(r.n_accepted) / r.n_drafted : 0.0},
          {"accepted_per_generated", static_cast<double>(r.n_accepted) / generated}};
}

int run_spec(SpecArgs& args) {
  bench::SpecBenchOptions& options = args.options;
  if (!resolve_engine(args.engine, options.model_path, options.engine)) return 1;
  if (!options.engine.draft_model.empty() && !args.workloads_given)
    options.workloads.push_back("draft");
  ProgressPrinter progress;
  Result<std::vector<bench::SpecRow>> rows = bench::run_spec_bench(options, progress.observer());
  if (!rows.ok()) return print_error(rows.error().message);
  nlohmann::json record = bench::run_facts(options.model_path);
  record["bench"] = "spec";
  record["config"] = {{"n_prompt", options.n_prompt},
                      {"n_gen", options.n_gen},
                      {"reps", options.reps},
                      {"batch_sizes", options.batch_sizes}};
  nlohmann::json results = nlohmann::json::array();
  for (const bench::SpecRow& r : *rows) results.push_back(row_json(r));
  record["results"] = results;
  if (args.json) {
    std::printf("%s\n", record.dump().c_str());
  } else {
    std::printf("decode tokens/s, speculation off and on (same engine, alternating runs)\n");
    std::printf("| workload | B | off t/s | on t/s | on/off | drafted | kept | kept/generated |\n");
    std::printf("|---|---|---|---|---|---|---|---|\n");
    for (const nlohmann::json& r : results) {
      std::printf("| %s | %d | %.2f ± %.2f | %.2f ± %.2f | %.3f ± %.3f | %lld | %lld | %.2f |\n",
                  r["workload"].get<std::string>().c_str(), r["batch"].get<int>(),
                  r["off_tokens_per_s"].get<double>(), r["off_tokens_per_s_stddev"].get<double>(),
                  r["on_tokens_per_s"].get<double>(), r["on_tokens_per_s_stddev"].get<double>(),
                  r["speedup"].get<double>(), r["speedup_stddev"].get<double>(),
                  r["drafted_tokens"].get<long long>(), r["accepted_tokens"].get<long long>(),
                  r["accepted_per_generated"].get<double>());
    }
  }
  std::fflush(stdout);
  const bench::CsvTable table =
      bench::csv_table(results, {"workload", "batch", "off_tokens_per_s", "on_tokens_per_s",
                                 "speedup", "drafted_tokens", "accepted_tokens", "acceptance"});
  return save_results(args.out, "spec", record, table).ok() ? 0 : 1;
}

}  // namespace

void add_bench_spec_command(CLI::App& bench, int& exit_code) {
  CLI::App* cmd = bench.add_subcommand(
      "spec",
      "Speculative decoding: decode tokens/s on and off where drafts hit (regenerate: the prefix "
      "cache; agent: the n-gram pool), are seldom found (miss: prompt lookup over prompts that "
      "repeat a span) or hardly exist (free), and with the guesses of a draft model (draft)");
  auto args = std::make_shared<SpecArgs>();
  args->engine.add_to(*cmd, /*model_required=*/false);
  args->engine.add_scheduler_options(*cmd);
  cmd->add_option("-p,--n-prompt", args->options.n_prompt, "Prompt tokens")->capture_default_str();
  cmd->add_option("-n,--n-gen", args->options.n_gen, "Generated tokens per request")
      ->capture_default_str();
  cmd->add_option("-r,--reps", args->options.reps, "Pairs of runs (off and on) per row")
      ->capture_default_str();
  cmd->add_option("--batch", args->options.batch_sizes, "Requests decoding together (a list)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--workloads", args->options.workloads,
                  "Workloads (a list of regenerate, agent, miss, free, draft; draft, the guesses "
                  "of --draft-model, is added when one is given)")
      ->delimiter(',')
      ->capture_default_str()
      ->each([args](const std::string&) { args->workloads_given = true; });
  cmd->add_option("--seed", args->options.seed, "Seed of the prompts")->capture_default_str();
  cmd->add_option("--out", args->out, "Results folder (default: bench-results/spec-<time>)");
  cmd->add_flag("--json", args->json, "Print the record as one JSON object");
  cmd->callback([&exit_code, args] { exit_code = run_spec(*args); });
}

}  // namespace trellis::cli
