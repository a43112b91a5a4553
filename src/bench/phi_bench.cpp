#include "bench/phi_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "bench/bench_tokens.h"
#include "bench/requests.h"
#include "bench/results.h"
#include "bench/stats.h"

namespace trellis::bench {
namespace {

using Clock = std::chrono::steady_clock;

// The bench_tokens seeds: the shared prefix, and session s's own tokens (+ s).
constexpr uint32_t kSharedSeed = 777;
constexpr uint32_t kSessionSeed = 1000;

// What one op measured, summed over its sessions (timings: mean TTFT, aggregate tokens/s).
struct OpFigures {
  int64_t prefill_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t blocks_allocated = 0;
  int64_t blocks_acquired = 0;
  double ttft_ms = 0;
  double generation_tokens_per_s = 0;
  // From the first session's submission to the last one's end: the serving, without the engine's
  // start (model, tokenizer, pool) and the warm-up, which would swamp it and do not depend on φ.
  int64_t heap_allocations = 0;
  std::vector<std::vector<TokenId>> outputs;
};

int64_t count_allocations(const PhiOptions& options) {
  return options.heap_allocations ? options.heap_allocations() : 0;
}

Result<OpFigures> run_op(const PhiOptions& options, const PhiPoint& point, bool cache_on) {
  EngineConfig config = options.engine;
  config.prefix_cache.enabled = cache_on;
  if (config.n_ctx == 0) config.n_ctx = options.prompt_len + options.decode_len;
  // Room for every session at once (and the shared prefix), so that nothing is preempted.
  if (config.kv_bytes == 0 && config.kv_tokens == 0) {
    config.kv_tokens = int64_t{options.n_sessions + 1} * (options.prompt_len + options.decode_len) +
                       int64_t{options.n_sessions + 1} * config.block_size;
  }
  config.scheduler.max_seqs = std::max(config.scheduler.max_seqs, options.n_sessions);
  config.scheduler.max_batch_tokens =
      std::max(config.scheduler.max_batch_tokens, config.scheduler.max_seqs);
  Result<std::unique_ptr<Engine>> created = Engine::create(options.model_path, config);
  if (!created.ok()) return created.error();
  std::unique_ptr<Engine> engine = std::move(created).value();
  const int64_t n_vocab = engine->model().hparams().n_vocab;
  const std::vector<TokenId> shared = bench_tokens(point.prefix_tokens, n_vocab, kSharedSeed);
  if (cache_on && !shared.empty()) TRELLIS_TRY(engine->warm("", shared));  // not timed

  std::vector<EngineRequest> sessions;
  for (int32_t s = 0; s < options.n_sessions; ++s) {
    std::vector<TokenId> prompt = shared;
    const std::vector<TokenId> own = bench_tokens(options.prompt_len - point.prefix_tokens, n_vocab,
                                                  kSessionSeed + static_cast<uint32_t>(s));
    prompt.insert(prompt.end(), own.begin(), own.end());
    sessions.push_back(greedy_request(std::move(prompt), options.decode_len));
  }
  std::vector<RequestOutput> outputs;
  outputs.reserve(sessions.size());
  const int64_t allocations_before = count_allocations(options);
  const Clock::time_point start = Clock::now();
  if (options.sequential) {
    for (EngineRequest& request : sessions) {
      Result<RequestOutput> out = engine->run(std::move(request));
      if (!out.ok()) return out.error();
      outputs.push_back(std::move(out).value());
    }
  } else {
    std::vector<RequestHandle> handles;
    for (EngineRequest& request : sessions) {
      Result<RequestHandle> h = engine->submit(std::move(request));
      if (!h.ok()) return h.error();
      handles.push_back(*h);
    }
    for (RequestHandle& h : handles) outputs.push_back(h.wait());
  }
  const double total_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  OpFigures op;
  op.heap_allocations = count_allocations(options) - allocations_before;
  int64_t generated = 0;
  for (const RequestOutput& out : outputs) {
    TRELLIS_TRY(output_status(out));
    const RequestStats& s = out.stats;
    generated += s.n_generated_tokens;
    op.prefill_tokens += s.n_prompt_tokens - s.n_cached_tokens;
    op.cached_tokens += s.n_cached_tokens;
    op.blocks_allocated += s.n_blocks_allocated;
    op.blocks_acquired += s.n_blocks_acquired;
    op.ttft_ms += s.ttft_ms / options.n_sessions;
    op.outputs.push_back(out.tokens);
  }
  op.generation_tokens_per_s = total_ms > 0 ? generated * 1000.0 / total_ms : 0;
  return op;
}

// The counts of the first rep (they do not vary), the timings' mean and spread over all reps.
nlohmann::json figures_json(const std::vector<OpFigures>& reps) {
  std::vector<double> ttft, tps;
  for (const OpFigures& op : reps) {
    ttft.push_back(op.ttft_ms);
    tps.push_back(op.generation_tokens_per_s);
  }
  const OpFigures& first = reps.front();
  return {{"prefill_tokens", first.prefill_tokens},
          {"heap_allocations", first.heap_allocations},
          {"cached_tokens", first.cached_tokens},
          {"kv_blocks_allocated", first.blocks_allocated},
          {"kv_blocks_acquired", first.blocks_acquired},
          {"ttft_ms", stats(ttft).mean},
          {"ttft_ms_stddev", stats(ttft).stddev},
          {"generation_tokens_per_s", stats(tps).mean},
          {"generation_tokens_per_s_stddev", stats(tps).stddev}};
}

}  // namespace

Result<std::vector<PhiPoint>> parse_phi_points(const std::string& list, int32_t prompt_len,
                                               int32_t block_size) {
  const int32_t L = prompt_len;
  const int32_t B = block_size;
  std::vector<PhiPoint> points;
  std::stringstream in(list);
  std::string item;
  const int32_t n_blocks = (L + B - 1) / B;
  while (std::getline(in, item, ',')) {
    PhiPoint p;
    p.label = item;
    if (item == "max") {
      p.prefix_blocks = n_blocks - 1;
    } else {
      char* end = nullptr;
      const double phi = std::strtod(item.c_str(), &end);
      if (item.empty() || *end != '\0' || !(phi >= 0 && phi <= 1))
        return Error{"--phi: '" + item + "' is not a number in [0, 1] or 'max'"};
      p.prefix_blocks = static_cast<int32_t>(std::lround(phi * L / B));
    }
    // The last prompt token always has its own block part: never share the whole prompt.
    p.prefix_blocks = std::clamp(p.prefix_blocks, 0, std::max(0, (L - 1) / B));
    p.prefix_tokens = p.prefix_blocks * B;
    p.effective_phi = static_cast<double>(p.prefix_tokens) / L;
    points.push_back(p);
  }
  if (points.empty()) return Error{"--phi: give at least one value"};
  return points;
}

double max_hit_rate(int32_t prompt_len, int32_t block_size) {
  const int32_t n_blocks = (prompt_len + block_size - 1) / block_size;
  return static_cast<double>(n_blocks - 1) / n_blocks;
}

Result<nlohmann::json> run_phi_bench(const PhiOptions& options, const Observer& observer) {
  const int32_t B = options.engine.block_size;
  if (options.prompt_len <= 0 || options.decode_len <= 0 || options.n_sessions <= 0 ||
      options.reps <= 0 || B <= 0) {
    return Error{"-L, -D, -N, -B and --reps must be positive"};
  }
  Result<std::vector<PhiPoint>> points = parse_phi_points(options.phi_list, options.prompt_len, B);
  if (!points.ok()) return points.error();
  // One untimed op first: page the weights in so that the first point is not a cold start.
  if (Result<OpFigures> first = run_op(options, points->front(), false); !first.ok())
    return first.error();

  nlohmann::json rows = nlohmann::json::array();
  const auto n_ops = static_cast<uint64_t>(2 * options.reps);
  for (const PhiPoint& point : *points) {
    const std::string stage = options.bench + " " + point.label;
    observer.report_progress(stage, 0, n_ops);
    std::vector<OpFigures> off, on;
    for (int32_t rep = 0; rep < options.reps; ++rep) {
      // Off then on, then on then off: a bias of whichever op runs second (the machine, the
      // allocator after the previous engine) falls on both modes alike over pairs of reps.
      const bool on_first = rep % 2 == 1;
      Result<OpFigures> a = run_op(options, point, on_first);
      if (!a.ok()) return a.error();
      observer.report_progress(stage, static_cast<uint64_t>(2 * rep + 1), n_ops);
      Result<OpFigures> b = run_op(options, point, !on_first);
      if (!b.ok()) return b.error();
      observer.report_progress(stage, static_cast<uint64_t>(2 * rep + 2), n_ops);
      off.push_back(std::move(on_first ? b : a).value());
      on.push_back(std::move(on_first ? a : b).value());
    }
    bool identical = true;
    for (size_t rep = 0; rep < off.size(); ++rep) identical &= off[rep].outputs == on[rep].outputs;
    nlohmann::json row = {{"phi", point.label},
                          {"effective_phi", point.effective_phi},
                          {"prefix_blocks", point.prefix_blocks},
                          {"shared_tokens", point.prefix_tokens},
                          {"cache_off", figures_json(off)},
                          {"cache_on", figures_json(on)},
                          {"outputs_identical", identical}};
    observer.report_row(row);
    rows.push_back(std::move(row));
  }
  nlohmann::json record = {{"bench", options.bench},
                           {"max_hit_rate", max_hit_rate(options.prompt_len, B)},
                           {"L", options.prompt_len},
                           {"D", options.decode_len},
                           {"N", options.n_sessions},
                           {"B", B},
                           {"reps", options.reps},
                           {"sequential", options.sequential},
                           {"threads", options.engine.n_threads},
                           {"points", rows}};
  record.update(run_facts(options.model_path));
  return record;
}

CsvTable phi_results_table(const nlohmann::json& record) {
  const std::vector<std::string> header = {"phi",
                                           "effective_phi",
                                           "shared_tokens",
                                           "cache",
                                           "prefill_tokens",
                                           "cached_tokens",
                                           "kv_blocks_allocated",
                                           "kv_blocks_acquired",
                                           "heap_allocations",
                                           "ttft_ms",
                                           "ttft_ms_stddev",
                                           "generation_tokens_per_s",
                                           "generation_tokens_per_s_stddev",
                                           "outputs_identical"};
  std::vector<std::vector<std::string>> rows;
  for (const nlohmann::json& p : record["points"]) {
    for (const char* mode : {"cache_off", "cache_on"}) {
      const nlohmann::json& f = p[mode];
      std::vector<std::string> row = {p["phi"].get<std::string>(), p["effective_phi"].dump(),
                                      p["shared_tokens"].dump(),
                                      mode == std::string("cache_on") ? "on" : "off"};
      for (const char* key : {"prefill_tokens", "cached_tokens", "kv_blocks_allocated",
                              "kv_blocks_acquired", "heap_allocations", "ttft_ms", "ttft_ms_stddev",
                              "generation_tokens_per_s", "generation_tokens_per_s_stddev"}) {
        row.push_back(f[key].dump());
      }
      row.push_back(p["outputs_identical"].dump());
      rows.push_back(std::move(row));
    }
  }
  return {header, rows};
}

}  // namespace trellis::bench
