// `trellis bench phi` and `bench ttft`: flags, then bench/phi_bench.h's sweep, printed as a
// table row by row, saved as results.json / results.csv and plotted.
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "base/alloc_hook.h"
#include "bench/phi_bench.h"
#include "bench/plot.h"
#include "bench_common.h"
#include "commands.h"
#include "engine_options.h"

namespace trellis::cli {
namespace {

struct PhiArgs {
  EngineOptions engine;
  bench::PhiOptions options;  // the sizes; model and engine come from `generator`
  bool json = false;
  std::string out;  // results folder; empty: bench-results/<bench>-<timestamp>
};

void print_phi_header(const PhiArgs& args) {
  const bench::PhiOptions& o = args.options;
  const int32_t B = o.engine.block_size;
  if (o.bench == "ttft") {
    std::printf("L=%d B=%d reps=%d model %s; highest reachable hit rate (L/B-1)/(L/B) = %.4f\n",
                o.prompt_len, B, o.reps, o.model_path.c_str(),
                bench::max_hit_rate(o.prompt_len, B));
    std::printf(
        "| phi | hit rate | TTFT off ms | TTFT on ms | speedup | ideal on ms (off x (1-phi)) "
        "|\n|---|---|---|---|---|---|\n");
  } else {
    std::printf(
        "L=%d D=%d N=%d B=%d reps=%d model %s (gen tokens/s: generated tokens / session time, "
        "prefill included, all sessions together)\n",
        o.prompt_len, o.decode_len, o.n_sessions, B, o.reps, o.model_path.c_str());
    std::printf(
        "| phi | shared tokens | cache | prefill tokens | cached tokens | blocks allocated | "
        "blocks acquired | allocations/op | TTFT ms | gen tokens/s | outputs |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n");
  }
}

void print_phi_row(const PhiArgs& args, const nlohmann::json& row) {
  const bench::PhiOptions& o = args.options;
  const double effective_phi = row["effective_phi"].get<double>();
  if (o.bench == "ttft") {
    const double off_ms = row["cache_off"]["ttft_ms"].get<double>();
    const double on_ms = row["cache_on"]["ttft_ms"].get<double>();
    const double hit = static_cast<double>(row["cache_on"]["cached_tokens"].get<int64_t>()) /
                       (static_cast<double>(o.prompt_len) * o.n_sessions);
    std::printf("| %.3f | %.3f | %.1f ± %.1f | %.1f ± %.1f | %.2fx | %.1f |\n", effective_phi, hit,
                off_ms, row["cache_off"]["ttft_ms_stddev"].get<double>(), on_ms,
                row["cache_on"]["ttft_ms_stddev"].get<double>(), on_ms > 0 ? off_ms / on_ms : 0.0,
                off_ms * (1 - effective_phi));
  } else {
    for (const char* mode : {"cache_off", "cache_on"}) {
      const nlohmann::json& f = row[mode];
      std::printf(
          "| %.3f | %d | %s | %lld | %lld | %lld | %lld | %lld | %.1f ± %.1f | %.2f ± %.2f | %s "
          "|\n",
          effective_phi, row["shared_tokens"].get<int>(),
          mode == std::string("cache_on") ? "on" : "off", f["prefill_tokens"].get<long long>(),
          f["cached_tokens"].get<long long>(), f["kv_blocks_allocated"].get<long long>(),
          f["kv_blocks_acquired"].get<long long>(), f["heap_allocations"].get<long long>(),
          f["ttft_ms"].get<double>(), f["ttft_ms_stddev"].get<double>(),
          f["generation_tokens_per_s"].get<double>(),
          f["generation_tokens_per_s_stddev"].get<double>(),
          row["outputs_identical"].get<bool>() ? "identical" : "DIFFERENT");
    }
  }
  std::fflush(stdout);
}

int run_phi(PhiArgs& args) {
  if (!args.engine.join_pipeline()) return 1;  // other ranks run their stage and exit here
  bench::PhiOptions& options = args.options;
  if (!resolve_engine(args.engine, options.model_path, options.engine)) return 1;
  options.heap_allocations = heap_allocations;

  const auto start = std::chrono::steady_clock::now();
  ProgressPrinter progress;
  bool header_printed = false;
  Result<nlohmann::json> record =
      bench::run_phi_bench(options, progress.observer([&](const nlohmann::json& row) {
        if (args.json) return;
        if (!header_printed) print_phi_header(args);
        header_printed = true;
        print_phi_row(args, row);
      }));
  if (!record.ok()) return print_error(record.error().message);
  (*record)["stages"] = stage_stats_json(options.engine.pipeline);
  print_stage_stats(options.engine.pipeline,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (args.json) std::printf("%s\n", record->dump().c_str());
  Result<std::string> dir =
      save_results(args.out, options.bench, *record, bench::phi_results_table(*record));
  if (!dir.ok()) return 1;
  // A missing or failing gnuplot only warns: the figures are a convenience beside the data.
  report_plot(options.bench == "ttft" ? bench::plot_ttft(*dir, *record)
                                      : bench::plot_phi(*dir, *record));
  for (const nlohmann::json& row : (*record)["points"]) {
    if (!row["outputs_identical"].get<bool>())
      return print_error("outputs differ with the cache on (phi " + row["phi"].get<std::string>() +
                         ")");
  }
  return 0;
}

// The options both commands share.
void add_phi_options(CLI::App& cmd, const std::shared_ptr<PhiArgs>& args) {
  args->engine.add_to(cmd, /*model_required=*/false);
  args->engine.add_pipeline_options(cmd);
  args->engine.add_scheduler_options(cmd);
  args->engine.add_disk_tier_options(cmd);
  bench::PhiOptions& o = args->options;
  cmd.add_option("-L", o.prompt_len, "Prompt length in tokens")->capture_default_str();
  cmd.add_option("--phi", o.phi_list, "Shared fractions: numbers in [0, 1] and/or max")
      ->capture_default_str();
  cmd.add_option("--reps", o.reps, "Repetitions per point")->capture_default_str();
  cmd.add_flag("--json", args->json, "Print one JSON object");
  cmd.add_option("--out", args->out,
                 "Folder for results.json, results.csv and the PNG plot (default "
                 "bench-results/<bench>-<time>)");
}

}  // namespace

void add_bench_phi_command(CLI::App& bench, int& exit_code) {
  CLI::App* cmd = bench.add_subcommand(
      "phi", "Prefix cache gain vs the shared-prefix fraction (cache off and on, one run)");
  auto args = std::make_shared<PhiArgs>();
  add_phi_options(*cmd, args);
  cmd->add_option("-D", args->options.decode_len, "Tokens generated per session")
      ->capture_default_str();
  cmd->add_option("-N", args->options.n_sessions, "Sessions per op")->capture_default_str();
  cmd->add_flag("--sequential", args->options.sequential,
                "Run the sessions one after another instead of all at once");
  cmd->callback([&exit_code, args] { exit_code = run_phi(*args); });

  CLI::App* ttft = bench.add_subcommand(
      "ttft", "Time to first token of one request sharing phi of a cached prompt (off vs on)");
  auto ttft_args = std::make_shared<PhiArgs>();
  bench::PhiOptions& t = ttft_args->options;
  t.bench = "ttft";
  t.n_sessions = 1;
  t.decode_len = 1;
  t.reps = 5;
  t.phi_list = "0,0.25,0.5,0.75,max";
  add_phi_options(*ttft, ttft_args);
  ttft->callback([&exit_code, ttft_args] { exit_code = run_phi(*ttft_args); });
}

}  // namespace trellis::cli
