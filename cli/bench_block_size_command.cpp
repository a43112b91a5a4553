// `trellis bench block-size`: what the KV block size B costs and buys the prefix cache when
// prompts share prefixes that end inside blocks.
//
// For each length L a fixed workload (the same for every B and mode):
//   warm set: --prompts prompts of L tokens forming a tree. Prompt 0 is random; prompt i copies
//             the first d tokens of an earlier prompt and continues with its own tokens, d odd
//             and so never a multiple of any even B.
//   probes:   -N prompts of L tokens; probe q copies the first s tokens of warm prompt q mod
//             --prompts (s odd, in [L/2, L - 3]) and continues with its own.
//   Divergence inside a block is where the two match modes differ: TOKEN mode splits the tree
//   there and reuses every matched token (copying the partial block); BLOCK mode reuses whole
//   blocks only, so a probe loses up to B - 1 tokens.
// One op (B, mode, L): a fresh engine with block size B and that match mode, the warm set cached
// one prompt after another (not timed), the radix tree's leaves counted, then the probes run one
// after another (max_tokens 1) and their TTFT and cached tokens recorded. A cache-off op per
// (B, L) gives the baseline. One untimed op first pages the weights in.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/progress_bar.h"
#include "bench_plot.h"
#include "bench_report.h"
#include "bench_support.h"
#include "commands.h"
#include "generator_options.h"

namespace trellis::cli {
namespace {

struct BlockSizeArgs {
  GeneratorOptions generator;
  std::string block_sizes = "8,16,32,64,128";
  // Not multiples of the larger block sizes: like real prompts, their last block is partial,
  // which BLOCK mode does not cache.
  std::string lengths = "120,250,500";
  int32_t n_prompts = 8;  // warm set size
  int32_t n_probes = 4;   // N
  int reps = 2;
  bool json = false;
  std::string out;  // results folder; empty: bench-results/block-size-<timestamp>
};

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

struct Workload {
  std::vector<std::vector<TokenId>> warm;
  std::vector<std::vector<TokenId>> probes;
  std::vector<int32_t> probe_shared;  // tokens probe q shares with its warm prompt
};

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

// Precondition: L >= 8.
Workload make_workload(int32_t L, int32_t n_prompts, int32_t n_probes, int64_t n_vocab) {
  Workload w;
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

struct OpFigures {
  int64_t leaves = 0;        // radix tree leaves after warming (0 with the cache off)
  double cached_tokens = 0;  // mean over the probes
  double shared_tokens = 0;  // mean over the probes: what a perfect cache could reuse
  double ttft_ms = 0;        // mean over the probes
};

Result<OpFigures> run_op(BlockSizeArgs& args, int32_t B, Mode mode, int32_t L) {
  const int32_t n_requests = args.n_prompts + args.n_probes;
  std::unique_ptr<Engine> engine = args.generator.open_engine([&](EngineConfig& config) {
    config.block_size = B;
    config.prefix_cache.enabled = mode != Mode::OFF;
    config.prefix_cache.mode = mode == Mode::BLOCK ? MatchMode::BLOCK : MatchMode::TOKEN;
    config.n_ctx = std::max(config.n_ctx, L + B);
    // Room for every prompt and probe with its partial-block copies: nothing is ever evicted,
    // so the leaf count and the hits do not depend on the pool size.
    config.kv_bytes = 0;
    config.kv_tokens = int64_t{n_requests + 2} * (L + 2 * B);
  });
  if (!engine) return Error{"cannot start the engine"};
  const Workload w =
      make_workload(L, args.n_prompts, args.n_probes, engine->model().hparams().n_vocab);
  OpFigures op;
  if (mode != Mode::OFF) {
    for (const std::vector<TokenId>& prompt : w.warm) TRELLIS_TRY(engine->warm("", prompt));
    TRELLIS_TRY(engine->check_invariants());  // also brings the stats up to date
    op.leaves = engine->stats().n_cache_leaves;
  }
  for (size_t q = 0; q < w.probes.size(); ++q) {
    EngineRequest request;
    request.prompt = w.probes[q];
    request.max_tokens = 1;
    request.sampling.temperature = 0;
    request.ignore_eos = true;
    Result<RequestHandle> h = engine->submit(std::move(request));
    if (!h.ok()) return h.error();
    const RequestOutput& out = h->wait();
    if (out.finish_reason == FinishReason::ERROR) return Error{out.error};
    op.ttft_ms += out.stats.ttft_ms / args.n_probes;
    op.cached_tokens += static_cast<double>(out.stats.n_cached_tokens) / args.n_probes;
    op.shared_tokens += static_cast<double>(w.probe_shared[q]) / args.n_probes;
  }
  return op;
}

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

// results.csv: one row per (B, mode, L) point.
CsvTable results_table(const nlohmann::json& record) {
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

int run_block_size(BlockSizeArgs& args) {
  Result<std::vector<int32_t>> sizes = parse_list(args.block_sizes, "--block-sizes");
  Result<std::vector<int32_t>> lengths = parse_list(args.lengths, "--lengths");
  for (const Result<std::vector<int32_t>>* r : {&sizes, &lengths}) {
    if (!r->ok()) {
      std::fprintf(stderr, "error: %s\n", r->error().message.c_str());
      return 1;
    }
  }
  if (args.n_prompts <= 0 || args.n_probes <= 0 || args.reps <= 0) {
    std::fprintf(stderr, "error: --prompts, -N and --reps must be positive\n");
    return 1;
  }
  for (int32_t L : *lengths) {
    if (L < 8) {
      std::fprintf(stderr, "error: --lengths: %d is too short (at least 8 tokens)\n", L);
      return 1;
    }
  }
  if (args.generator.model.empty()) args.generator.model = default_model_path();
  // One untimed op first: page the weights in so that the first point is not a cold start.
  if (Result<OpFigures> first = run_op(args, sizes->front(), Mode::TOKEN, lengths->front());
      !first.ok()) {
    std::fprintf(stderr, "error: %s\n", first.error().message.c_str());
    return 1;
  }

  if (!args.json) {
    std::printf(
        "L=%s prompts=%d probes=%d reps=%d model %s (means over lengths and reps; cached: probe "
        "tokens served by the cache, of shared: tokens the probe shares with a warm prompt)\n",
        args.lengths.c_str(), args.n_prompts, args.n_probes, args.reps,
        args.generator.model.c_str());
    std::printf(
        "| B | mode | leaves | cached tokens/probe | of shared | TTFT ms |\n"
        "|---|---|---|---|---|---|\n");
  }
  nlohmann::json points = nlohmann::json::array();
  nlohmann::json summary = nlohmann::json::array();
  for (int32_t B : *sizes) {
    const std::vector<Mode> modes = {Mode::TOKEN, Mode::BLOCK, Mode::OFF};
    ProgressBar progress(
        "B=" + std::to_string(B),
        static_cast<uint64_t>(modes.size() * lengths->size()) * static_cast<uint64_t>(args.reps));
    uint64_t done = 0;
    std::vector<nlohmann::json> rows;
    for (Mode mode : modes) {
      std::vector<double> all_ttft, all_leaves, all_cached, all_shared;
      for (int32_t L : *lengths) {
        std::vector<double> ttft, leaves;
        OpFigures last;
        for (int rep = 0; rep < args.reps; ++rep) {
          Result<OpFigures> op = run_op(args, B, mode, L);
          progress.update(++done);
          if (!op.ok()) {
            std::fprintf(stderr, "error: %s\n", op.error().message.c_str());
            return 1;
          }
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
      summary.push_back(row);
      if (args.json) continue;
      const double shared = row["shared_tokens_mean"].get<double>();
      const double cached = row["cached_tokens_mean"].get<double>();
      std::printf("| %d | %s | %.1f | %.1f | %.1f%% | %.2f ± %.2f |\n", B,
                  row["mode"].get<std::string>().c_str(), row["leaves_mean"].get<double>(), cached,
                  shared > 0 ? 100.0 * cached / shared : 0.0, row["ttft_ms_mean"].get<double>(),
                  row["ttft_ms_stddev"].get<double>());
    }
    if (!args.json) std::fflush(stdout);
  }
  nlohmann::json out = {{"bench", "block-size"},
                        {"block_sizes", *sizes},
                        {"lengths", *lengths},
                        {"prompts", args.n_prompts},
                        {"N", args.n_probes},
                        {"reps", args.reps},
                        {"threads", args.generator.threads},
                        {"machine", machine_json()},
                        {"commit", source_commit()},
                        {"points", points},
                        {"summary", summary}};
  Result<nlohmann::json> model = model_file_json(args.generator.model);
  out["model"] = model.ok() ? *model : nlohmann::json{{"path", args.generator.model}};
  if (args.json) std::printf("%s\n", out.dump().c_str());
  Result<std::string> dir = write_results(args.out, "block-size", out, results_table(out));
  if (!dir.ok()) {
    std::fprintf(stderr, "error: %s\n", dir.error().message.c_str());
    return 1;
  }
  plot_block_size(*dir, out);  // only warns when gnuplot is missing or fails
  return 0;
}

}  // namespace

void add_bench_block_size_command(CLI::App& bench, int& exit_code) {
  CLI::App* cmd = bench.add_subcommand(
      "block-size",
      "Radix tree leaves, cached tokens and TTFT vs the KV block size, token vs block match, "
      "with prefixes shared up to points inside blocks");
  auto args = std::make_shared<BlockSizeArgs>();
  args->generator.add_to(*cmd, /*model_required=*/false);
  args->generator.add_scheduler_options(*cmd);
  cmd->add_option("--block-sizes", args->block_sizes,
                  "Block sizes to sweep (the sweep sets --block-size, --match, --prefix-cache "
                  "and the pool size itself: large enough that nothing is evicted)")
      ->capture_default_str();
  cmd->add_option("--lengths", args->lengths, "Prompt lengths in tokens (at least 8 each)")
      ->capture_default_str();
  cmd->add_option("--prompts", args->n_prompts, "Prompts in the warm set")->capture_default_str();
  cmd->add_option("-N", args->n_probes, "Probe requests per op")->capture_default_str();
  cmd->add_option("--reps", args->reps, "Repetitions per point")->capture_default_str();
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->add_option("--out", args->out,
                  "Folder for results.json, results.csv and block-size.png (default "
                  "bench-results/block-size-<time>)");
  cmd->callback([&exit_code, args] { exit_code = run_block_size(*args); });
}

}  // namespace trellis::cli
