// `trellis bench speed`: prompt processing and generation throughput, like llama-bench's pp/tg.
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "bench/bench_tokens.h"
#include "bench/process_memory.h"
#include "bench/stats.h"
#include "commands.h"
#include "generator_options.h"

namespace trellis::cli {
namespace {

using bench::bench_tokens;
using bench::peak_rss_bytes;
using bench::Stats;
using bench::stats;
using Clock = std::chrono::steady_clock;

struct SpeedArgs {
  GeneratorOptions generator;
  int32_t n_prompt = 512;
  int32_t n_gen = 128;
  int reps = 3;
  bool json = false;
};

// One prefill of n_prompt tokens; returns tokens/s.
Result<double> measure_prompt(Generator& gen, const std::vector<TokenId>& prompt) {
  const Clock::time_point start = Clock::now();
  Result<std::vector<std::vector<float>>> logits = gen.prompt_logits(prompt, false);
  if (!logits.ok()) return logits.error();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return static_cast<double>(prompt.size()) / seconds;
}

// n_gen decode steps after a one-token prompt; returns tokens/s of the decode steps.
Result<double> measure_generation(Generator& gen, int32_t n_gen, TokenId first) {
  GenerationRequest request;
  request.prompt = {first};
  request.max_tokens = n_gen + 1;  // the first token comes from the prefill, then n_gen decodes
  request.ignore_eos = true;
  request.sampling.temperature = 0;
  Result<GenerationResult> result = gen.generate(request, [](std::string_view) { return true; });
  if (!result.ok()) return result.error();
  return result->timings.generation_tokens_per_s();
}

int run_speed(SpeedArgs& args) {
  if (args.n_prompt <= 0 || args.n_gen <= 0 || args.reps <= 0) {
    std::fprintf(stderr, "error: -p, -n and -r must be positive\n");
    return 1;
  }
  std::unique_ptr<Generator> generator = args.generator.open([&](GeneratorConfig& config) {
    if (config.n_ctx == 0) config.n_ctx = std::max(args.n_prompt, args.n_gen + 1);
    config.max_batch_tokens = std::max(config.max_batch_tokens, args.n_prompt);
  });
  if (!generator) return 1;
  Generator& gen = *generator;
  const std::vector<TokenId> prompt = bench_tokens(args.n_prompt, gen.model().hparams().n_vocab);

  std::vector<double> pp, tg;
  // The first round warms caches and page-ins; it is not counted.
  for (int rep = -1; rep < args.reps; ++rep) {
    Result<double> p = measure_prompt(gen, prompt);
    Result<double> g = measure_generation(gen, args.n_gen, prompt[0]);
    if (!p.ok() || !g.ok()) {
      std::fprintf(stderr, "error: %s\n", (!p.ok() ? p.error() : g.error()).message.c_str());
      return 1;
    }
    if (rep >= 0) {
      pp.push_back(*p);
      tg.push_back(*g);
    }
  }
  const Stats pp_stats = stats(pp);
  const Stats tg_stats = stats(tg);
  const uint64_t rss = peak_rss_bytes();
  if (args.json) {
    nlohmann::json out = {{"model", args.generator.model},
                          {"threads", gen.n_threads()},
                          {"n_prompt", args.n_prompt},
                          {"n_gen", args.n_gen},
                          {"reps", args.reps},
                          {"prompt_tokens_per_s", pp_stats.mean},
                          {"prompt_tokens_per_s_stddev", pp_stats.stddev},
                          {"generation_tokens_per_s", tg_stats.mean},
                          {"generation_tokens_per_s_stddev", tg_stats.stddev},
                          {"kv_cache_bytes", gen.kv_bytes()},
                          {"peak_rss_bytes", rss}};
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("| model | threads | test | tokens/s |\n|---|---|---|---|\n");
    std::printf("| %s | %d | pp%d | %.2f ± %.2f |\n", args.generator.model.c_str(), gen.n_threads(),
                args.n_prompt, pp_stats.mean, pp_stats.stddev);
    std::printf("| %s | %d | tg%d | %.2f ± %.2f |\n", args.generator.model.c_str(), gen.n_threads(),
                args.n_gen, tg_stats.mean, tg_stats.stddev);
    std::printf("peak RSS %.1f MiB, KV cache %.1f MiB\n", static_cast<double>(rss) / (1 << 20),
                static_cast<double>(gen.kv_bytes()) / (1 << 20));
  }
  return 0;
}

}  // namespace

void add_bench_commands(CLI::App& app, int& exit_code) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  CLI::App* speed = bench->add_subcommand("speed", "Prompt processing and generation tokens/s");
  auto args = std::make_shared<SpeedArgs>();
  args->generator.add_to(*speed, /*model_required=*/false);
  speed->add_option("-p,--n-prompt", args->n_prompt, "Prompt tokens (pp)")->capture_default_str();
  speed->add_option("-n,--n-gen", args->n_gen, "Generated tokens (tg)")->capture_default_str();
  speed->add_option("-r,--reps", args->reps, "Repetitions")->capture_default_str();
  speed->add_flag("--json", args->json, "Print one JSON object");
  speed->callback([&exit_code, args] { exit_code = run_speed(*args); });
  add_bench_phi_command(*bench, exit_code);
  add_bench_workload_command(*bench, exit_code);
  add_bench_server_command(*bench, exit_code);
  add_bench_block_size_command(*bench, exit_code);
}

}  // namespace trellis::cli
