#include "bench/speed_bench.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_tokens.h"
#include "bench/requests.h"

namespace trellis::bench {
namespace {

// An engine for the measurement, its prefix cache off (every repetition computes its whole
// prompt), and the prompt of options.n_prompt tokens.
struct Setup {
  std::unique_ptr<Engine> engine;
  std::vector<TokenId> prompt;
};

Result<Setup> set_up(const SpeedOptions& options, EngineConfig config) {
  config.prefix_cache.enabled = false;
  Result<std::unique_ptr<Engine>> created = Engine::create(options.model_path, config);
  if (!created.ok()) return created.error();
  Setup setup{std::move(created).value(), {}};
  setup.prompt = bench_tokens(options.n_prompt, setup.engine->model().hparams().n_vocab);
  return setup;
}

// Runs one greedy request to its end; its figures.
Result<RequestStats> run_request(Engine& engine, std::vector<TokenId> prompt, int32_t max_tokens) {
  Result<RequestOutput> out = engine.run(greedy_request(std::move(prompt), max_tokens));
  if (!out.ok()) return out.error();
  return out->stats;
}

// What one batched repetition measured.
struct BatchRep {
  double prefill_ms = 0;
  double decode_ms = 0;
  int64_t decode_tokens = 0;
};

// Forks the prompt into n sequences of n_gen + 1 tokens each and waits for them all. The fork's
// sequences are created together, so their submission times agree to within microseconds: the
// prefill ends at the earliest first token, the decode at the latest end.
Result<BatchRep> run_batch(Engine& engine, const std::vector<TokenId>& prompt, int32_t n,
                           int32_t n_gen) {
  Result<std::vector<RequestHandle>> handles = engine.fork(greedy_request(prompt, n_gen + 1), n);
  if (!handles.ok()) return handles.error();
  double first_token_ms = 0;
  double end_ms = 0;
  BatchRep rep;
  for (size_t i = 0; i < handles->size(); ++i) {
    const RequestOutput& out = (*handles)[i].wait();
    TRELLIS_TRY(output_status(out));
    const RequestStats& s = out.stats;
    first_token_ms = i == 0 ? s.ttft_ms : std::min(first_token_ms, s.ttft_ms);
    end_ms = std::max(end_ms, s.total_ms);
    rep.decode_tokens += std::max(0, s.n_generated_tokens - 1);
    if (i == 0) rep.prefill_ms = s.prefill_ms();  // the leader's: it ran the prompt
  }
  rep.decode_ms = end_ms - first_token_ms;
  return rep;
}

double mean_of(const std::vector<double>& values) {
  return stats(values).mean;
}

Result<BatchSpeed> run_batch_size(Engine& engine, const SpeedOptions& options,
                                  const std::vector<TokenId>& prompt, int32_t n,
                                  const Observer& observer) {
  std::vector<double> pp, tg, prefill_ms, decode_ms;
  const auto total = static_cast<uint64_t>(options.reps) + 1;
  const std::string stage = "speed batch " + std::to_string(n);
  observer.report_progress(stage, 0, total);
  for (int32_t rep = -1; rep < options.reps; ++rep) {  // rep -1 warms up, uncounted
    Result<BatchRep> r = run_batch(engine, prompt, n, options.n_gen);
    if (!r.ok()) return r.error();
    if (rep >= 0) {
      pp.push_back(r->prefill_ms > 0 ? options.n_prompt * 1000.0 / r->prefill_ms : 0.0);
      tg.push_back(r->decode_ms > 0 ? static_cast<double>(r->decode_tokens) * 1000.0 / r->decode_ms
                                    : 0.0);
      prefill_ms.push_back(r->prefill_ms);
      decode_ms.push_back(r->decode_ms);
    }
    observer.report_progress(stage, static_cast<uint64_t>(rep + 2), total);
  }
  return BatchSpeed{n, stats(pp), stats(tg), mean_of(prefill_ms), mean_of(decode_ms)};
}

// The batched measurement: an engine sized for the largest batch (every sequence running at
// once, the prompt in one chunk, nothing evicted or preempted), then each batch size in turn.
Result<SpeedResult> run_batched(const SpeedOptions& options, const Observer& observer) {
  const int32_t max_n = *std::max_element(options.batch_sizes.begin(), options.batch_sizes.end());
  EngineConfig config = options.engine;
  if (config.n_ctx == 0) config.n_ctx = options.n_prompt + options.n_gen + 1;
  config.scheduler.max_seqs = std::max(config.scheduler.max_seqs, max_n);
  config.scheduler.max_batch_tokens =
      std::max({config.scheduler.max_batch_tokens, options.n_prompt, max_n});
  if (config.kv_bytes == 0 && config.kv_tokens == 0) {
    // The shared prompt once, then each sequence's own generated tokens and a copied block.
    config.kv_tokens =
        options.n_prompt + int64_t{max_n} * (options.n_gen + 1 + 2 * config.block_size);
  }
  Result<Setup> setup = set_up(options, config);
  if (!setup.ok()) return setup.error();
  Engine& engine = *setup->engine;
  const std::vector<TokenId>& prompt = setup->prompt;
  SpeedResult result;
  for (int32_t n : options.batch_sizes) {
    Result<BatchSpeed> row = run_batch_size(engine, options, prompt, n, observer);
    if (!row.ok()) return row.error();
    result.batches.push_back(*row);
  }
  result.n_threads = engine.n_threads();
  result.kv_cache_bytes = engine.kv_bytes();
  result.kv_peak_bytes = engine.stats().peak_kv_bytes_in_use();
  result.kv_peak_tokens = options.n_prompt + int64_t{max_n} * options.n_gen;
  return result;
}

// tg at each depth: an engine with the prefix cache on and a context for the deepest one.
Result<SpeedResult> run_at_depths(const SpeedOptions& options, const Observer& observer) {
  const int32_t max_depth = *std::max_element(options.depths.begin(), options.depths.end());
  EngineConfig config = options.engine;
  if (config.n_ctx == 0) config.n_ctx = max_depth + options.n_gen + 1;
  if (config.kv_bytes == 0 && config.kv_tokens == 0)
    config.kv_tokens = 2 * (int64_t{max_depth} + options.n_gen + 1);  // a context and a spare
  config.prefix_cache.enabled = true;
  Result<std::unique_ptr<Engine>> created = Engine::create(options.model_path, config);
  if (!created.ok()) return created.error();
  Engine& engine = **created;
  SpeedResult result;
  for (int32_t depth : options.depths) {
    const std::vector<TokenId> context = bench_tokens(depth, engine.model().hparams().n_vocab);
    std::vector<double> tg;
    const auto total = static_cast<uint64_t>(options.reps) + 1;
    const std::string stage = "speed depth " + std::to_string(depth);
    observer.report_progress(stage, 0, total);
    for (int32_t rep = -1; rep < options.reps; ++rep) {  // rep -1 computes the context, uncounted
      Result<RequestStats> decode = run_request(engine, context, options.n_gen + 1);
      if (!decode.ok()) return decode.error();
      if (rep >= 0) tg.push_back(decode->decode_tokens_per_s());
      observer.report_progress(stage, static_cast<uint64_t>(rep + 2), total);
    }
    result.depths.push_back(DepthSpeed{depth, stats(tg)});
  }
  result.n_threads = engine.n_threads();
  result.kv_cache_bytes = engine.kv_bytes();
  result.kv_peak_bytes = engine.stats().peak_kv_bytes_in_use();
  result.kv_peak_tokens = int64_t{max_depth} + options.n_gen;
  return result;
}

}  // namespace

Result<SpeedResult> run_speed_bench(const SpeedOptions& options, const Observer& observer) {
  if (options.n_prompt <= 0 || options.n_gen <= 0 || options.reps <= 0)
    return Error{"-p, -n and -r must be positive"};
  for (int32_t n : options.batch_sizes) {
    if (n < 1) return Error{"batch sizes must be at least 1"};
  }
  for (int32_t d : options.depths) {
    if (d < 1) return Error{"depths must be at least 1"};
  }
  if (!options.batch_sizes.empty() && !options.depths.empty())
    return Error{"--batch and --depth are separate measurements: give one of them"};
  if (!options.batch_sizes.empty()) return run_batched(options, observer);
  if (!options.depths.empty()) return run_at_depths(options, observer);
  EngineConfig config = options.engine;
  if (config.n_ctx == 0) config.n_ctx = std::max(options.n_prompt, options.n_gen + 1);
  config.scheduler.max_batch_tokens = std::max(config.scheduler.max_batch_tokens, options.n_prompt);
  Result<Setup> setup = set_up(options, config);
  if (!setup.ok()) return setup.error();
  Engine& engine = *setup->engine;
  const std::vector<TokenId>& prompt = setup->prompt;

  std::vector<double> pp, tg;
  const auto total = static_cast<uint64_t>(options.reps) + 1;
  observer.report_progress("speed", 0, total);
  for (int32_t rep = -1; rep < options.reps; ++rep) {  // rep -1 warms up, uncounted
    Result<RequestStats> prefill = run_request(engine, prompt, 1);
    if (!prefill.ok()) return prefill.error();
    // The first token comes from the prefill, then n_gen decode steps.
    Result<RequestStats> decode = run_request(engine, {prompt[0]}, options.n_gen + 1);
    if (!decode.ok()) return decode.error();
    if (rep >= 0) {
      pp.push_back(prefill->prefill_tokens_per_s());
      tg.push_back(decode->decode_tokens_per_s());
    }
    observer.report_progress("speed", static_cast<uint64_t>(rep + 2), total);
  }
  SpeedResult result;
  result.prompt_tokens_per_s = stats(pp);
  result.generation_tokens_per_s = stats(tg);
  result.n_threads = engine.n_threads();
  result.kv_cache_bytes = engine.kv_bytes();
  result.kv_peak_bytes = engine.stats().peak_kv_bytes_in_use();
  result.kv_peak_tokens = options.n_prompt;
  return result;
}

}  // namespace trellis::bench
