// `trellis bench speed`: prompt processing and generation throughput, like llama-bench's pp/tg
// (measured by bench/speed_bench.h), printed as a table or one JSON object.
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/process_memory.h"
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

// The KV pool's size and what requests held of it at most, into a JSON report.
void add_memory(nlohmann::json& out, const bench::SpeedResult& result, uint64_t rss) {
  out["kv_cache_bytes"] = result.kv_cache_bytes;
  out["kv_peak_bytes"] = result.kv_peak_bytes;
  out["kv_peak_tokens"] = result.kv_peak_tokens;
  out["peak_rss_bytes"] = rss;
}

// The process's peak RSS and the KV pool's size; what requests held of it at most, per token.
void print_memory(const bench::SpeedResult& result, uint64_t rss) {
  std::printf("peak RSS %.1f MiB, KV cache %.1f MiB", static_cast<double>(rss) / (1 << 20),
              static_cast<double>(result.kv_cache_bytes) / (1 << 20));
  if (result.kv_peak_tokens > 0) {
    std::printf(
        ", KV held at peak %.1f MiB for %lld tokens (%.0f bytes per token)",
        static_cast<double>(result.kv_peak_bytes) / (1 << 20),
        static_cast<long long>(result.kv_peak_tokens),
        static_cast<double>(result.kv_peak_bytes) / static_cast<double>(result.kv_peak_tokens));
  }
  std::printf("\n");
}

// The batched rows, as llama-batched-bench prints them with a shared prompt: PP prompt tokens, TG
// generated per sequence, B sequences, N_KV = PP + B * TG cells, then times and aggregate rates.
void print_batched(const bench::SpeedOptions& options, const bench::SpeedResult& result, bool json,
                   uint64_t rss) {
  const int32_t pp = options.n_prompt;
  const int32_t tg = options.n_gen;
  if (json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const bench::BatchSpeed& b : result.batches) {
      rows.push_back({{"n_sequences", b.n_sequences},
                      {"prompt_tokens_per_s", b.prompt_tokens_per_s.mean},
                      {"prompt_tokens_per_s_stddev", b.prompt_tokens_per_s.stddev},
                      {"generation_tokens_per_s", b.generation_tokens_per_s.mean},
                      {"generation_tokens_per_s_stddev", b.generation_tokens_per_s.stddev},
                      {"prefill_ms", b.prefill_ms},
                      {"decode_ms", b.decode_ms}});
    }
    nlohmann::json out = {{"model", options.model_path},
                          {"threads", result.n_threads},
                          {"n_prompt", pp},
                          {"n_gen", tg},
                          {"reps", options.reps},
                          {"batches", rows}};
    add_memory(out, result, rss);
    std::printf("%s\n", out.dump().c_str());
    return;
  }
  std::printf("shared prompt, %d threads, %d reps\n", result.n_threads, options.reps);
  std::printf("|   PP |   TG |  B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s |   S t/s |\n");
  std::printf("|------|------|----|------|--------|----------|--------|----------|---------|\n");
  for (const bench::BatchSpeed& b : result.batches) {
    const int64_t n_kv = pp + int64_t{b.n_sequences} * tg;
    const double t_pp = b.prefill_ms / 1000.0;
    const double t_tg = b.decode_ms / 1000.0;
    const double total = t_pp + t_tg > 0 ? static_cast<double>(n_kv) / (t_pp + t_tg) : 0.0;
    std::printf("| %4d | %4d | %2d | %4lld | %6.3f | %8.2f | %6.3f | %8.2f | %7.2f |\n", pp, tg,
                b.n_sequences, static_cast<long long>(n_kv), t_pp, b.prompt_tokens_per_s.mean, t_tg,
                b.generation_tokens_per_s.mean, total);
  }
  print_memory(result, rss);
}

// tg at each depth, as llama-bench prints "tg64 @ d4096"; the KV bytes per token of context.
void print_depths(const bench::SpeedOptions& options, const bench::SpeedResult& result, bool json,
                  uint64_t rss) {
  const KvTypes& types = options.engine.kv_types;
  if (json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const bench::DepthSpeed& d : result.depths) {
      rows.push_back({{"depth", d.depth},
                      {"generation_tokens_per_s", d.generation_tokens_per_s.mean},
                      {"generation_tokens_per_s_stddev", d.generation_tokens_per_s.stddev}});
    }
    nlohmann::json out = {{"model", options.model_path},
                          {"threads", result.n_threads},
                          {"n_gen", options.n_gen},
                          {"reps", options.reps},
                          {"kv_type_k", kv_type_name(types.key)},
                          {"kv_type_v", kv_type_name(types.value)},
                          {"depths", rows}};
    add_memory(out, result, rss);
    std::printf("%s\n", out.dump().c_str());
    return;
  }
  std::printf("| model | threads | KV | test | tokens/s |\n|---|---|---|---|---|\n");
  for (const bench::DepthSpeed& d : result.depths) {
    std::printf("| %s | %d | %s | tg%d @ d%d | %.2f ± %.2f |\n", options.model_path.c_str(),
                result.n_threads, kv_types_name(types).c_str(), options.n_gen, d.depth,
                d.generation_tokens_per_s.mean, d.generation_tokens_per_s.stddev);
  }
  print_memory(result, rss);
}

int run_speed(SpeedArgs& args, bool spec_given) {
  if (!args.engine.join_pipeline()) return 1;  // other ranks run their stage and exit here
  bench::SpeedOptions& options = args.options;
  if (!resolve_engine(args.engine, options.model_path, options.engine)) return 1;
  // Plain decode speed unless asked otherwise: the repetitions generate the same answer again,
  // which speculative decoding would draft from the cache.
  if (!spec_given) options.engine.speculation.sources.fill(false);
  ProgressPrinter progress;
  const auto start = std::chrono::steady_clock::now();
  Result<bench::SpeedResult> result = bench::run_speed_bench(options, progress.observer());
  if (!result.ok()) return print_error(result.error().message);
  print_stage_stats(
      options.engine.pipeline,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (!options.batch_sizes.empty()) {
    print_batched(options, *result, args.json, peak_rss_bytes());
    return 0;
  }
  if (!options.depths.empty()) {
    print_depths(options, *result, args.json, peak_rss_bytes());
    return 0;
  }
  const bench::Stats& pp = result->prompt_tokens_per_s;
  const bench::Stats& tg = result->generation_tokens_per_s;
  const uint64_t rss = peak_rss_bytes();
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
                          {"stages", stage_stats_json(options.engine.pipeline)}};
    add_memory(out, *result, rss);
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("| model | threads | test | tokens/s |\n|---|---|---|---|\n");
    std::printf("| %s | %d | pp%d | %.2f ± %.2f |\n", model.c_str(), result->n_threads,
                options.n_prompt, pp.mean, pp.stddev);
    std::printf("| %s | %d | tg%d | %.2f ± %.2f |\n", model.c_str(), result->n_threads,
                options.n_gen, tg.mean, tg.stddev);
    print_memory(*result, rss);
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
  args->engine.add_pipeline_options(*speed);
  speed->add_option("-p,--n-prompt", args->options.n_prompt, "Prompt tokens (pp)")
      ->capture_default_str();
  speed->add_option("-n,--n-gen", args->options.n_gen, "Generated tokens (tg)")
      ->capture_default_str();
  speed->add_option("-r,--reps", args->options.reps, "Repetitions")->capture_default_str();
  speed
      ->add_option("--batch", args->options.batch_sizes,
                   "Batched, as llama-batched-bench: N sequences sharing the prompt decode "
                   "together (a list, say 1,2,4,8); aggregate prefill and decode tokens/s")
      ->delimiter(',');
  speed
      ->add_option("-d,--depth", args->options.depths,
                   "tg after a context of this many tokens instead, as llama-bench -p 0 -d (a "
                   "list, say 4096,16384); the context is computed once and cached")
      ->delimiter(',');
  speed->add_flag("--json", args->json, "Print one JSON object");
  speed->callback(
      [&exit_code, args, speed] { exit_code = run_speed(*args, speed->count("--spec") > 0); });
  add_bench_phi_command(*bench, exit_code);
  add_bench_workload_command(*bench, exit_code);
  add_bench_server_command(*bench, exit_code);
  add_bench_router_command(*bench, exit_code);
  add_bench_block_size_command(*bench, exit_code);
  add_bench_restart_command(*bench, exit_code);
  add_bench_structured_command(*bench, exit_code);
  add_bench_spec_command(*bench, exit_code);
  add_bench_kv_types_command(*bench, exit_code);
  add_bench_embed_command(*bench, exit_code);
}

}  // namespace trellis::cli
