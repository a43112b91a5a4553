#include "bench/restart_bench.h"

#include <filesystem>
#include <memory>
#include <vector>

#include "bench/bench_tokens.h"
#include "bench/requests.h"

namespace trellis::bench {
namespace {

struct Sample {
  std::vector<double> ttft_ms;
  double cached = 0, disk_cached = 0, load_ms = 0;

  void add(const RequestStats& s) {
    ttft_ms.push_back(s.ttft_ms);
    cached += s.n_cached_tokens;
    disk_cached += s.n_disk_cached_tokens;
    load_ms += s.disk_load_ms;
  }
  RestartPhase phase(int32_t reps) const {
    return RestartPhase{stats(ttft_ms), cached / reps, disk_cached / reps, load_ms / reps};
  }
};

}  // namespace

Result<RestartResult> run_restart_bench(const RestartOptions& options, const Observer& observer) {
  if (options.n_system < 1 || options.n_question < 1 || options.n_gen < 1 || options.reps < 1)
    return Error{"the system prompt, question, generated tokens and reps must be positive"};
  if (options.engine.cache_dir.empty()) return Error{"bench restart needs a cache directory"};
  EngineConfig config = options.engine;
  config.prefix_cache.enabled = true;
  if (config.n_ctx == 0) config.n_ctx = options.n_system + options.n_question + options.n_gen + 1;
  Sample cold, hot, warm;
  RestartResult result;
  observer.report_progress("restart", 0, static_cast<uint64_t>(options.reps));
  for (int32_t rep = 0; rep < options.reps; ++rep) {
    std::error_code ec;
    std::filesystem::remove_all(config.cache_dir, ec);  // cold means cold
    // The same system prompt every repetition, new questions each time.
    const auto seed = static_cast<uint32_t>(1000 + 3 * rep);
    auto prompt = [&](const Engine& engine, uint32_t question_seed) {
      const int64_t n_vocab = engine.model().hparams().n_vocab;
      std::vector<TokenId> p = bench_tokens(options.n_system, n_vocab, 77);
      const std::vector<TokenId> q = bench_tokens(options.n_question, n_vocab, question_seed);
      p.insert(p.end(), q.begin(), q.end());
      return p;
    };
    Result<std::unique_ptr<Engine>> one = Engine::create(options.model_path, config);
    if (!one.ok()) return one.error();
    const std::vector<TokenId> question_a = prompt(**one, seed);
    Result<RequestOutput> a = (*one)->run(greedy_request(question_a, options.n_gen));
    if (!a.ok()) return a.error();
    cold.add(a->stats);
    Result<RequestOutput> b = (*one)->run(greedy_request(prompt(**one, seed + 1), options.n_gen));
    if (!b.ok()) return b.error();
    hot.add(b->stats);
    one->reset();  // the engine's end writes what it cached to the disk tier

    Result<std::unique_ptr<Engine>> two = Engine::create(options.model_path, config);
    if (!two.ok()) return two.error();
    Result<RequestOutput> c = (*two)->run(greedy_request(prompt(**two, seed + 2), options.n_gen));
    if (!c.ok()) return c.error();
    warm.add(c->stats);
    Result<RequestOutput> again = (*two)->run(greedy_request(question_a, options.n_gen));
    if (!again.ok()) return again.error();
    result.outputs_match = result.outputs_match && again->tokens == a->tokens;
    observer.report_progress("restart", static_cast<uint64_t>(rep + 1),
                             static_cast<uint64_t>(options.reps));
  }
  result.cold = cold.phase(options.reps);
  result.hot = hot.phase(options.reps);
  result.warm = warm.phase(options.reps);
  return result;
}

nlohmann::json restart_result_json(const RestartResult& result) {
  nlohmann::json phases = nlohmann::json::array();
  const std::pair<const char*, const RestartPhase*> all[] = {
      {"cold", &result.cold}, {"hot", &result.hot}, {"warm_from_disk", &result.warm}};
  for (const auto& [name, p] : all) {
    phases.push_back({{"phase", name},
                      {"ttft_ms", p->ttft_ms.mean},
                      {"ttft_ms_stddev", p->ttft_ms.stddev},
                      {"cached_tokens", p->cached_tokens},
                      {"disk_cached_tokens", p->disk_cached_tokens},
                      {"disk_load_ms", p->disk_load_ms}});
  }
  return {{"phases", phases}, {"outputs_match", result.outputs_match}};
}

}  // namespace trellis::bench
