// `trellis bench block-size`: flags, then bench/block_size_bench.h's sweep over block sizes and
// match modes, printed as a table (one row per block size and mode), saved as results.json /
// results.csv and plotted.
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bench/block_size_bench.h"
#include "bench/plot.h"
#include "bench_common.h"
#include "commands.h"
#include "engine_options.h"

namespace trellis::cli {
namespace {

struct BlockSizeArgs {
  EngineOptions engine;
  std::string block_sizes = "8,16,32,64,128";
  std::string lengths = "120,250,500";
  bench::BlockSizeOptions options;  // counts and reps; the rest is set at run
  bool json = false;
  std::string out;  // results folder; empty: bench-results/block-size-<timestamp>
};

Result<std::vector<int32_t>> parse_list(const std::string& list, const char* flag) {
  std::vector<int32_t> values;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v <= 0 || v > (1 << 20))
      return Error{std::string(flag) + ": '" + item + "' is not a positive integer"};
    values.push_back(static_cast<int32_t>(v));
  }
  if (values.empty()) return Error{std::string(flag) + ": give at least one value"};
  return values;
}

void print_row(const nlohmann::json& row) {
  const double shared = row["shared_tokens_mean"].get<double>();
  const double cached = row["cached_tokens_mean"].get<double>();
  std::printf("| %d | %s | %.1f | %.1f | %.1f%% | %.2f ± %.2f |\n", row["B"].get<int>(),
              row["mode"].get<std::string>().c_str(), row["leaves_mean"].get<double>(), cached,
              shared > 0 ? 100.0 * cached / shared : 0.0, row["ttft_ms_mean"].get<double>(),
              row["ttft_ms_stddev"].get<double>());
  std::fflush(stdout);
}

int run_block_size(BlockSizeArgs& args) {
  bench::BlockSizeOptions& options = args.options;
  Result<std::vector<int32_t>> sizes = parse_list(args.block_sizes, "--block-sizes");
  if (!sizes.ok()) return print_error(sizes.error().message);
  Result<std::vector<int32_t>> lengths = parse_list(args.lengths, "--lengths");
  if (!lengths.ok()) return print_error(lengths.error().message);
  options.block_sizes = *sizes;
  options.lengths = *lengths;
  if (!resolve_engine(args.engine, options.model_path, options.engine)) return 1;

  ProgressPrinter progress;
  bool header_printed = false;
  Result<nlohmann::json> record =
      bench::run_block_size_bench(options, progress.observer([&](const nlohmann::json& row) {
        if (args.json) return;
        if (!header_printed) {
          std::printf(
              "L=%s prompts=%d probes=%d reps=%d model %s (means over lengths and reps; cached: "
              "probe tokens served by the cache, of shared: tokens the probe shares with a warm "
              "prompt)\n",
              args.lengths.c_str(), options.n_prompts, options.n_probes, options.reps,
              options.model_path.c_str());
          std::printf(
              "| B | mode | leaves | cached tokens/probe | of shared | TTFT ms |\n"
              "|---|---|---|---|---|---|\n");
          header_printed = true;
        }
        print_row(row);
      }));
  if (!record.ok()) return print_error(record.error().message);
  if (args.json) std::printf("%s\n", record->dump().c_str());
  Result<std::string> dir =
      save_results(args.out, "block-size", *record, bench::block_size_results_table(*record));
  if (!dir.ok()) return 1;
  report_plot(bench::plot_block_size(*dir, *record));  // only warns: the plot is a convenience
  return 0;
}

}  // namespace

void add_bench_block_size_command(CLI::App& bench, int& exit_code) {
  CLI::App* cmd = bench.add_subcommand(
      "block-size",
      "Radix tree leaves, cached tokens and TTFT vs the KV block size, token vs block match, "
      "with prefixes shared up to points inside blocks");
  auto args = std::make_shared<BlockSizeArgs>();
  args->engine.add_to(*cmd, /*model_required=*/false);
  args->engine.add_scheduler_options(*cmd);
  cmd->add_option("--block-sizes", args->block_sizes,
                  "Block sizes to sweep (the sweep sets --block-size, --match, --prefix-cache "
                  "and the pool size itself: large enough that nothing is evicted)")
      ->capture_default_str();
  cmd->add_option("--lengths", args->lengths, "Prompt lengths in tokens (at least 8 each)")
      ->capture_default_str();
  cmd->add_option("--prompts", args->options.n_prompts, "Prompts in the warm set")
      ->capture_default_str();
  cmd->add_option("-N", args->options.n_probes, "Probe requests per op")->capture_default_str();
  cmd->add_option("--reps", args->options.reps, "Repetitions per point")->capture_default_str();
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->add_option("--out", args->out,
                  "Folder for results.json, results.csv and block-size.png (default "
                  "bench-results/block-size-<time>)");
  cmd->callback([&exit_code, args] { exit_code = run_block_size(*args); });
}

}  // namespace trellis::cli
