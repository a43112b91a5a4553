#include "bench/block_size_bench.h"

#include <algorithm>
#include <random>

#include "bench/bench_tokens.h"
#include "bench/requests.h"
#include "bench/results.h"
#include "bench/stats.h"

namespace trellis::bench {
namespace {

enum class Mode { TOKEN, BLOCK, OFF };

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::TOKEN:
      return "token";
    case Mode::BLOCK:
      return "block";
    case Mode::OFF:
      return "off";
  }
  return "?";
}

// `base`'s first `shared` tokens, then fresh tokens up to L, the first of which differs from
// base[shared] so that the two really diverge at `shared`.
std::vector<TokenId> branch(const std::vector<TokenId>& base, int32_t shared, int32_t L,
                            int64_t n_vocab, uint32_t seed) {
  std::vector<TokenId> p(base.begin(), base.begin() + shared);
  std::vector<TokenId> own = bench_tokens(L - shared, n_vocab, seed);
  if (!own.empty() && static_cast<size_t>(shared) < base.size() &&
      own.front() == base[static_cast<size_t>(shared)]) {
    own.front() = static_cast<TokenId>(3 + (own.front() - 3 + 1) % (n_vocab - 3));
  }
  p.insert(p.end(), own.begin(), own.end());
  return p;
}

// An odd number in [lo, hi] (hi >= lo, and the range holds one).
int32_t odd_in(std::mt19937& rng, int32_t lo, int32_t hi) {
  const int32_t v = std::uniform_int_distribution<int32_t>(lo, hi)(rng);
  if (v % 2 != 0) return v;
  return v + 1 <= hi ? v + 1 : v - 1;
}

struct OpFigures {
  int64_t leaves = 0;        // radix tree leaves after warming (0 with the cache off)
  double cached_tokens = 0;  // mean over the probes
  double shared_tokens = 0;  // mean over the probes: what a perfect cache could reuse
  double ttft_ms = 0;        // mean over the probes
};

Result<OpFigures> run_op(const BlockSizeOptions& options, int32_t B, Mode mode, int32_t L) {
  const int32_t n_requests = options.n_prompts + options.n_probes;
  EngineConfig config = options.engine;
  config.block_size = B;
  config.prefix_cache.enabled = mode != Mode::OFF;
  config.prefix_cache.mode = mode == Mode::BLOCK ? MatchMode::BLOCK : MatchMode::TOKEN;
  config.n_ctx = std::max(config.n_ctx, L + B);
  // Room for every prompt and probe with its partial-block copies: nothing is ever evicted,
  // so the leaf count and the hits do not depend on the pool size.
  config.kv_bytes = 0;
  config.kv_tokens = int64_t{n_requests + 2} * (L + 2 * B);
  Result<std::unique_ptr<Engine>> created = Engine::create(options.model_path, config);
  if (!created.ok()) return created.error();
  std::unique_ptr<Engine> engine = std::move(created).value();
  const BlockSizePrompts w =
      block_size_prompts(L, options.n_prompts, options.n_probes, engine->model().hparams().n_vocab);
  OpFigures op;
  if (mode != Mode::OFF) {
    for (const std::vector<TokenId>& prompt : w.warm) TRELLIS_TRY(engine->warm("", prompt));
    TRELLIS_TRY(engine->check_invariants());  // also brings the stats up to date
    op.leaves = engine->stats().n_cache_leaves;
  }
  for (size_t q = 0; q < w.probes.size(); ++q) {
    Result<RequestOutput> out = engine->run(greedy_request(w.probes[q], 1));
    if (!out.ok()) return out.error();
    op.ttft_ms += out->stats.ttft_ms / options.n_probes;
    op.cached_tokens += static_cast<double>(out->stats.n_cached_tokens) / options.n_probes;
    op.shared_tokens += static_cast<double>(w.probe_shared[q]) / options.n_probes;
  }
  return op;
}

}  // namespace

BlockSizePrompts block_size_prompts(int32_t L, int32_t n_prompts, int32_t n_probes,
                                    int64_t n_vocab) {
  BlockSizePrompts w;
  std::mt19937 rng(4242u + static_cast<uint32_t>(L));
  w.warm.push_back(bench_tokens(L, n_vocab, 5000));
  for (int32_t i = 1; i < n_prompts; ++i) {
    const int32_t parent = std::uniform_int_distribution<int32_t>(0, i - 1)(rng);
    const int32_t d = odd_in(rng, std::max(1, L / 4), L - 2);
    w.warm.push_back(branch(w.warm[static_cast<size_t>(parent)], d, L, n_vocab,
                            5000 + static_cast<uint32_t>(i)));
  }
  for (int32_t q = 0; q < n_probes; ++q) {
    const auto& base = w.warm[static_cast<size_t>(q % n_prompts)];
    const int32_t s = odd_in(rng, L / 2, L - 3);
    w.probes.push_back(branch(base, s, L, n_vocab, 9000 + static_cast<uint32_t>(q)));
    w.probe_shared.push_back(s);
  }
  return w;
}

Result<nlohmann::json> run_block_size_bench(const BlockSizeOptions& options,
                                            const Observer& observer) {
  if (options.block_sizes.empty() || options.lengths.empty())
    return Error{"give at least one block size and one length"};
  for (int32_t B : options.block_sizes) {
    if (B <= 0) return Error{"--block-sizes: " + std::to_string(B) + " is not positive"};
  }
  if (options.n_prompts <= 0 || options.n_probes <= 0 || options.reps <= 0)
    return Error{"--prompts, -N and --reps must be positive"};
  for (int32_t L : options.lengths) {
    if (L < 8)
      return Error{"--lengths: " + std::to_string(L) + " is too short (at least 8 tokens)"};
  }
  // One untimed op first: page the weights in so that the first point is not a cold start.
  if (Result<OpFigures> first =
          run_op(options, options.block_sizes.front(), Mode::TOKEN, options.lengths.front());
      !first.ok()) {
    return first.error();
  }
  const std::vector<Mode> modes = {Mode::TOKEN, Mode::BLOCK, Mode::OFF};
  nlohmann::json points = nlohmann::json::array();
  nlohmann::json summary = nlohmann::json::array();
  for (int32_t B : options.block_sizes) {
    const std::string stage = "B=" + std::to_string(B);
    const uint64_t n_ops = static_cast<uint64_t>(modes.size() * options.lengths.size()) *
                           static_cast<uint64_t>(options.reps);
    uint64_t done = 0;
    observer.report_progress(stage, done, n_ops);
    std::vector<nlohmann::json> rows;
    for (Mode mode : modes) {
      std::vector<double> all_ttft, all_leaves, all_cached, all_shared;
      for (int32_t L : options.lengths) {
        std::vector<double> ttft, leaves;
        OpFigures last;
        for (int32_t rep = 0; rep < options.reps; ++rep) {
          Result<OpFigures> op = run_op(options, B, mode, L);
          if (!op.ok()) return op.error();
          observer.report_progress(stage, ++done, n_ops);
          last = *op;
          ttft.push_back(op->ttft_ms);
          leaves.push_back(static_cast<double>(op->leaves));
          all_ttft.push_back(op->ttft_ms);
          all_leaves.push_back(static_cast<double>(op->leaves));
          all_cached.push_back(op->cached_tokens);
          all_shared.push_back(op->shared_tokens);
        }
        points.push_back({{"B", B},
                          {"mode", mode_name(mode)},
                          {"L", L},
                          {"leaves", stats(leaves).mean},
                          {"leaves_stddev", stats(leaves).stddev},
                          {"shared_tokens", last.shared_tokens},
                          {"cached_tokens", last.cached_tokens},
                          {"ttft_ms", stats(ttft).mean},
                          {"ttft_ms_stddev", stats(ttft).stddev}});
      }
      rows.push_back({{"B", B},
                      {"mode", mode_name(mode)},
                      {"leaves_mean", stats(all_leaves).mean},
                      {"leaves_stddev", stats(all_leaves).stddev},
                      {"cached_tokens_mean", stats(all_cached).mean},
                      {"shared_tokens_mean", stats(all_shared).mean},
                      {"ttft_ms_mean", stats(all_ttft).mean},
                      {"ttft_ms_stddev", stats(all_ttft).stddev}});
    }
    for (const nlohmann::json& row : rows) {
      observer.report_row(row);
      summary.push_back(row);
    }
  }
  nlohmann::json record = {{"bench", "block-size"},
                           {"block_sizes", options.block_sizes},
                           {"lengths", options.lengths},
                           {"prompts", options.n_prompts},
                           {"N", options.n_probes},
                           {"reps", options.reps},
                           {"threads", options.engine.n_threads},
                           {"points", points},
                           {"summary", summary}};
  record.update(run_facts(options.model_path));
  return record;
}

// results.csv: one row per (B, mode, L) point.
CsvTable block_size_results_table(const nlohmann::json& record) {
  const std::vector<std::string> header = {
      "B",       "mode",          "L", "leaves", "leaves_stddev", "shared_tokens", "cached_tokens",
      "ttft_ms", "ttft_ms_stddev"};
  std::vector<std::vector<std::string>> rows;
  for (const nlohmann::json& p : record["points"]) {
    std::vector<std::string> row = {p["B"].dump(), p["mode"].get<std::string>()};
    for (const char* key : {"L", "leaves", "leaves_stddev", "shared_tokens", "cached_tokens",
                            "ttft_ms", "ttft_ms_stddev"})
      row.push_back(p[key].dump());
    rows.push_back(std::move(row));
  }
  return {header, rows};
}

}  // namespace trellis::bench
