// `trellis bench speed`: prompt processing and generation throughput, like llama-bench's pp/tg
// (measured by bench/speed_bench.h), printed as a table or one JSON object.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "bench/process_memory.h"
#include "bench/speed_bench.h"
#include "bench_common.h"
#include "commands.h"
#include "engine_options.h"

namespace trellis::cli {
namespace {

struct SpeedArgs {
  EngineOptions engine;
  bench::SpeedOptions options;  // the sizes; model and engine come from `engine`
  bool json = false;
};

int run_speed(SpeedArgs& args) {
  bench::SpeedOptions& options = args.options;
  if (!resolve_engine(args.engine, options.model_path, options.engine)) return 1;
  ProgressPrinter progress;
  Result<bench::SpeedResult> result = bench::run_speed_bench(options, progress.observer());
  if (!result.ok()) return print_error(result.error().message);
  const bench::Stats& pp = result->prompt_tokens_per_s;
  const bench::Stats& tg = result->generation_tokens_per_s;
  const uint64_t rss = bench::peak_rss_bytes();
  const std::string& model = options.model_path;
  if (args.json) {
    nlohmann::json out = {{"model", model},
                          {"threads", result->n_threads},
                          {"n_prompt", options.n_prompt},
                          {"n_gen", options.n_gen},
                          {"reps", options.reps},
                          {"prompt_tokens_per_s", pp.mean},
                          {"prompt_tokens_per_s_stddev", pp.stddev},
                          {"generation_tokens_per_s", tg.mean},
                          {"generation_tokens_per_s_stddev", tg.stddev},
                          {"kv_cache_bytes", result->kv_cache_bytes},
                          {"peak_rss_bytes", rss}};
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("| model | threads | test | tokens/s |\n|---|---|---|---|\n");
    std::printf("| %s | %d | pp%d | %.2f ± %.2f |\n", model.c_str(), result->n_threads,
                options.n_prompt, pp.mean, pp.stddev);
    std::printf("| %s | %d | tg%d | %.2f ± %.2f |\n", model.c_str(), result->n_threads,
                options.n_gen, tg.mean, tg.stddev);
    std::printf("peak RSS %.1f MiB, KV cache %.1f MiB\n", static_cast<double>(rss) / (1 << 20),
                static_cast<double>(result->kv_cache_bytes) / (1 << 20));
  }
  return 0;
}

}  // namespace

void add_bench_commands(CLI::App& app, int& exit_code) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  CLI::App* speed = bench->add_subcommand("speed", "Prompt processing and generation tokens/s");
  auto args = std::make_shared<SpeedArgs>();
  args->engine.add_to(*speed, /*model_required=*/false);
  speed->add_option("-p,--n-prompt", args->options.n_prompt, "Prompt tokens (pp)")
      ->capture_default_str();
  speed->add_option("-n,--n-gen", args->options.n_gen, "Generated tokens (tg)")
      ->capture_default_str();
  speed->add_option("-r,--reps", args->options.reps, "Repetitions")->capture_default_str();
  speed->add_flag("--json", args->json, "Print one JSON object");
  speed->callback([&exit_code, args] { exit_code = run_speed(*args); });
  add_bench_phi_command(*bench, exit_code);
  add_bench_workload_command(*bench, exit_code);
  add_bench_server_command(*bench, exit_code);
  add_bench_block_size_command(*bench, exit_code);
}

}  // namespace trellis::cli
