// `trellis bench speed`: prompt processing and generation throughput, like llama-bench's pp/tg.
// Both run through the engine, with the prefix cache off (every repetition computes its prompt).
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "bench_support.h"
#include "commands.h"
#include "engine_options.h"

namespace trellis::cli {
namespace {

struct SpeedArgs {
  EngineOptions engine;
  int32_t n_prompt = 512;
  int32_t n_gen = 128;
  int reps = 3;
  bool json = false;
};

// Runs one greedy request to its end.
Result<RequestStats> run_request(Engine& engine, std::vector<TokenId> prompt, int32_t max_tokens) {
  EngineRequest request;
  request.prompt = std::move(prompt);
  request.max_tokens = max_tokens;
  request.ignore_eos = true;
  request.sampling.temperature = 0;
  Result<RequestHandle> handle = engine.submit(std::move(request));
  if (!handle.ok()) return handle.error();
  const RequestOutput& out = handle->wait();
  if (out.finish_reason == FinishReason::ERROR) return Error{out.error};
  return out.stats;
}

// One prefill of the prompt (one chunk) and its first token; returns prompt tokens/s.
Result<double> measure_prompt(Engine& engine, const std::vector<TokenId>& prompt) {
  Result<RequestStats> stats = run_request(engine, prompt, 1);
  if (!stats.ok()) return stats.error();
  return stats->prefill_tokens_per_s();
}

// n_gen decode steps after a one-token prompt; returns tokens/s of the decode steps.
Result<double> measure_generation(Engine& engine, int32_t n_gen, TokenId first) {
  // The first token comes from the prefill, then n_gen decode steps.
  Result<RequestStats> stats = run_request(engine, {first}, n_gen + 1);
  if (!stats.ok()) return stats.error();
  return stats->decode_tokens_per_s();
}

int run_speed(SpeedArgs& args) {
  if (args.n_prompt <= 0 || args.n_gen <= 0 || args.reps <= 0) {
    std::fprintf(stderr, "error: -p, -n and -r must be positive\n");
    return 1;
  }
  std::unique_ptr<Engine> engine = args.engine.open_engine([&](EngineConfig& config) {
    if (config.n_ctx == 0) config.n_ctx = std::max(args.n_prompt, args.n_gen + 1);
    config.scheduler.max_batch_tokens = std::max(config.scheduler.max_batch_tokens, args.n_prompt);
    config.prefix_cache.enabled = false;
  });
  if (!engine) return 1;
  const std::vector<TokenId> prompt =
      bench_tokens(args.n_prompt, engine->model().hparams().n_vocab);

  std::vector<double> pp, tg;
  // The first round warms caches and page-ins; it is not counted.
  for (int rep = -1; rep < args.reps; ++rep) {
    Result<double> p = measure_prompt(*engine, prompt);
    Result<double> g = measure_generation(*engine, args.n_gen, prompt[0]);
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
    nlohmann::json out = {{"model", args.engine.model},
                          {"threads", engine->n_threads()},
                          {"n_prompt", args.n_prompt},
                          {"n_gen", args.n_gen},
                          {"reps", args.reps},
                          {"prompt_tokens_per_s", pp_stats.mean},
                          {"prompt_tokens_per_s_stddev", pp_stats.stddev},
                          {"generation_tokens_per_s", tg_stats.mean},
                          {"generation_tokens_per_s_stddev", tg_stats.stddev},
                          {"kv_cache_bytes", engine->kv_bytes()},
                          {"peak_rss_bytes", rss}};
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("| model | threads | test | tokens/s |\n|---|---|---|---|\n");
    std::printf("| %s | %d | pp%d | %.2f ± %.2f |\n", args.engine.model.c_str(),
                engine->n_threads(), args.n_prompt, pp_stats.mean, pp_stats.stddev);
    std::printf("| %s | %d | tg%d | %.2f ± %.2f |\n", args.engine.model.c_str(),
                engine->n_threads(), args.n_gen, tg_stats.mean, tg_stats.stddev);
    std::printf("peak RSS %.1f MiB, KV cache %.1f MiB\n", static_cast<double>(rss) / (1 << 20),
                static_cast<double>(engine->kv_bytes()) / (1 << 20));
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
