// `trellis bench restart`: time to first token of a long system prompt cold, hot (in memory) and
// warm from the disk tier after a restart (measured by bench/restart_bench.h).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "bench/restart_bench.h"
#include "bench/results.h"
#include "bench_common.h"
#include "commands.h"
#include "engine_options.h"

namespace trellis::cli {
namespace {

struct RestartArgs {
  EngineOptions engine;
  bench::RestartOptions options;
  std::string out;
  bool json = false;
};

int run_restart(RestartArgs& args) {
  bench::RestartOptions& options = args.options;
  if (!resolve_engine(args.engine, options.model_path, options.engine)) return 1;
  // The tier lives in a folder of its own inside --cache-dir (default: the temporary directory),
  // wiped before each repetition and removed at the end: nothing else in the directory is
  // touched.
  const std::filesystem::path parent = options.engine.cache_dir.empty()
                                           ? std::filesystem::temp_directory_path()
                                           : std::filesystem::path(options.engine.cache_dir);
  options.engine.cache_dir =
      (parent / ("trellis-bench-restart-" + std::to_string(::getpid()))).string();
  ProgressPrinter progress;
  Result<bench::RestartResult> result = bench::run_restart_bench(options, progress.observer());
  std::error_code ec;
  std::filesystem::remove_all(options.engine.cache_dir, ec);
  if (!result.ok()) return print_error(result.error().message);
  nlohmann::json record = bench::run_facts(options.model_path);
  record["bench"] = "restart";
  record["config"] = {{"n_system", options.n_system},
                      {"n_question", options.n_question},
                      {"n_gen", options.n_gen},
                      {"reps", options.reps},
                      {"block_size", options.engine.block_size}};
  record["results"] = bench::restart_result_json(*result);
  if (args.json) {
    std::printf("%s\n", record.dump().c_str());
  } else {
    std::printf("| phase | TTFT ms | cached tokens | from disk | disk load ms |\n");
    std::printf("|---|---|---|---|---|\n");
    for (const nlohmann::json& p : record["results"]["phases"]) {
      std::printf("| %s | %.1f ± %.1f | %.0f | %.0f | %.1f |\n",
                  p["phase"].get<std::string>().c_str(), p["ttft_ms"].get<double>(),
                  p["ttft_ms_stddev"].get<double>(), p["cached_tokens"].get<double>(),
                  p["disk_cached_tokens"].get<double>(), p["disk_load_ms"].get<double>());
    }
    std::printf("outputs after the restart %s\n",
                result->outputs_match ? "match" : "DIFFER (a bug: please report it)");
  }
  std::fflush(stdout);
  const bench::CsvTable table = bench::csv_table(
      record["results"]["phases"], {"phase", "ttft_ms", "ttft_ms_stddev", "cached_tokens",
                                    "disk_cached_tokens", "disk_load_ms"});
  if (!save_results(args.out, "restart", record, table).ok()) return 1;
  return result->outputs_match ? 0 : 1;
}

}  // namespace

void add_bench_restart_command(CLI::App& bench, int& exit_code) {
  CLI::App* cmd = bench.add_subcommand(
      "restart",
      "TTFT of a long system prompt: cold, hot in memory, and warm from the disk tier after a "
      "restart (in a folder of its own inside --cache-dir, default the temporary directory)");
  auto args = std::make_shared<RestartArgs>();
  args->engine.add_to(*cmd, /*model_required=*/false);
  args->engine.add_scheduler_options(*cmd);
  args->engine.add_disk_tier_options(*cmd);
  cmd->add_option("-L,--system-tokens", args->options.n_system, "System prompt tokens")
      ->capture_default_str();
  cmd->add_option("--question-tokens", args->options.n_question, "Question tokens")
      ->capture_default_str();
  cmd->add_option("-n,--n-gen", args->options.n_gen, "Generated tokens per request")
      ->capture_default_str();
  cmd->add_option("--reps", args->options.reps, "Repetitions (each on a fresh cache directory)")
      ->capture_default_str();
  cmd->add_option("--out", args->out, "Results folder (default: bench-results/restart-<time>)");
  cmd->add_flag("--json", args->json, "Print the record as one JSON object");
  cmd->callback([&exit_code, args] { exit_code = run_restart(*args); });
}

}  // namespace trellis::cli
