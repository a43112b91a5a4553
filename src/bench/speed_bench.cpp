#include "bench/speed_bench.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "bench/bench_tokens.h"
#include "bench/requests.h"

namespace trellis::bench {
namespace {

// Runs one greedy request to its end; its figures.
Result<RequestStats> run_request(Engine& engine, std::vector<TokenId> prompt, int32_t max_tokens) {
  Result<RequestOutput> out = engine.run(greedy_request(std::move(prompt), max_tokens));
  if (!out.ok()) return out.error();
  return out->stats;
}

}  // namespace

Result<SpeedResult> run_speed_bench(const SpeedOptions& options, const Observer& observer) {
  if (options.n_prompt <= 0 || options.n_gen <= 0 || options.reps <= 0)
    return Error{"-p, -n and -r must be positive"};
  EngineConfig config = options.engine;
  if (config.n_ctx == 0) config.n_ctx = std::max(options.n_prompt, options.n_gen + 1);
  config.scheduler.max_batch_tokens = std::max(config.scheduler.max_batch_tokens, options.n_prompt);
  config.prefix_cache.enabled = false;
  Result<std::unique_ptr<Engine>> created = Engine::create(options.model_path, config);
  if (!created.ok()) return created.error();
  Engine& engine = **created;
  const std::vector<TokenId> prompt =
      bench_tokens(options.n_prompt, engine.model().hparams().n_vocab);

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
  return SpeedResult{stats(pp), stats(tg), engine.n_threads(), engine.kv_bytes()};
}

}  // namespace trellis::bench
