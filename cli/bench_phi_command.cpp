// `trellis bench phi`: what the prefix cache saves as the shared-prefix fraction φ grows.
//
// For each φ: prefixBlocks = round(φ·L/B) blocks of shared "system prompt" (φ "max": every block
// but the last), then N sessions of L prompt tokens each (the shared prefix + their own suffix)
// that generate D tokens. One op = a fresh generator, the shared prefix warmed into the cache
// (cache on only; not timed), then the N sessions submitted at once to the concurrent engine
// (--sequential: one after another). Cache off and cache on run in the same process, point by
// point, and their outputs are compared token for token.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
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

using Clock = std::chrono::steady_clock;

struct PhiArgs {
  GeneratorOptions generator;
  int32_t prompt_len = 512;  // L
  int32_t decode_len = 64;   // D
  int32_t n_sessions = 4;    // N
  std::string phi_list = "0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,max";
  int reps = 1;
  bool json = false;
  bool sequential = false;    // sessions one after another instead of all at once
  std::string out;            // results folder; empty: bench-results/<bench>-<timestamp>
  std::string bench = "phi";  // "ttft": one probe session per op, a TTFT-centred table
};

// One φ value of the sweep, quantized to whole blocks.
struct PhiPoint {
  std::string label;  // as given
  int32_t prefix_blocks = 0;
  int32_t prefix_tokens = 0;
  double effective_phi = 0;
};

// What one op measured, summed over its sessions (timings: mean TTFT, aggregate tokens/s).
struct OpFigures {
  int64_t prefill_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t blocks_allocated = 0;
  int64_t blocks_acquired = 0;
  double ttft_ms = 0;
  double generation_tokens_per_s = 0;
  int64_t heap_allocations = 0;  // during the whole op: engine start, warm-up, sessions
  std::vector<std::vector<TokenId>> outputs;
};

Result<std::vector<PhiPoint>> parse_phi_list(const std::string& list, int32_t L, int32_t B) {
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

Result<OpFigures> run_op(PhiArgs& args, const PhiPoint& point, bool cache_on) {
  const int64_t allocations_before = heap_allocations();
  std::unique_ptr<Engine> engine = args.generator.open_engine([&](EngineConfig& config) {
    config.prefix_cache.enabled = cache_on;
    if (config.n_ctx == 0) config.n_ctx = args.prompt_len + args.decode_len;
    // Room for every session at once (and the shared prefix), so that nothing is preempted.
    if (config.kv_bytes == 0 && config.kv_tokens == 0) {
      config.kv_tokens = int64_t{args.n_sessions + 1} * (args.prompt_len + args.decode_len) +
                         int64_t{args.n_sessions + 1} * config.block_size;
    }
    config.scheduler.max_seqs = std::max(config.scheduler.max_seqs, args.n_sessions);
    config.scheduler.max_batch_tokens =
        std::max(config.scheduler.max_batch_tokens, config.scheduler.max_seqs);
  });
  if (!engine) return Error{"cannot start the engine"};
  const int64_t n_vocab = engine->model().hparams().n_vocab;
  const std::vector<TokenId> shared = bench_tokens(point.prefix_tokens, n_vocab, 777);
  if (cache_on && !shared.empty()) TRELLIS_TRY(engine->warm("", shared));  // not timed

  std::vector<EngineRequest> sessions;
  for (int32_t s = 0; s < args.n_sessions; ++s) {
    EngineRequest request;
    request.prompt = shared;
    const std::vector<TokenId> own = bench_tokens(args.prompt_len - point.prefix_tokens, n_vocab,
                                                  1000 + static_cast<uint32_t>(s));
    request.prompt.insert(request.prompt.end(), own.begin(), own.end());
    request.max_tokens = args.decode_len;
    request.sampling.temperature = 0;
    request.ignore_eos = true;
    sessions.push_back(std::move(request));
  }
  const Clock::time_point start = Clock::now();
  std::vector<RequestOutput> outputs;
  if (args.sequential) {
    for (EngineRequest& request : sessions) {
      Result<RequestHandle> h = engine->submit(std::move(request));
      if (!h.ok()) return h.error();
      outputs.push_back(h->wait());
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
  int64_t generated = 0;
  for (const RequestOutput& out : outputs) {
    if (out.finish_reason == FinishReason::ERROR) return Error{out.error};
    const RequestStats& s = out.stats;
    generated += s.n_generated_tokens;
    op.prefill_tokens += s.n_prompt_tokens - s.n_cached_tokens;
    op.cached_tokens += s.n_cached_tokens;
    op.blocks_allocated += s.n_blocks_allocated;
    op.blocks_acquired += s.n_blocks_acquired;
    op.ttft_ms += s.ttft_ms / args.n_sessions;
    op.outputs.push_back(out.tokens);
  }
  op.generation_tokens_per_s = total_ms > 0 ? generated * 1000.0 / total_ms : 0;
  engine.reset();
  op.heap_allocations = heap_allocations() - allocations_before;
  return op;
}

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

// results.csv: one row per point and cache mode.
CsvTable results_table(const nlohmann::json& record) {
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

int run_phi(PhiArgs& args) {
  const int32_t B = args.generator.block_size;
  if (args.prompt_len <= 0 || args.decode_len <= 0 || args.n_sessions <= 0 || args.reps <= 0 ||
      B <= 0) {
    std::fprintf(stderr, "error: -L, -D, -N, -B and --reps must be positive\n");
    return 1;
  }
  Result<std::vector<PhiPoint>> points = parse_phi_list(args.phi_list, args.prompt_len, B);
  if (!points.ok()) {
    std::fprintf(stderr, "error: %s\n", points.error().message.c_str());
    return 1;
  }
  if (args.generator.model.empty()) args.generator.model = default_model_path();
  // One untimed op first: page the weights in so that the first point is not a cold start.
  if (!run_op(args, points->front(), false).ok()) return 1;

  nlohmann::json results = nlohmann::json::array();
  const bool ttft = args.bench == "ttft";
  // The probe diverges in its last block at best, so this is the highest reachable hit rate.
  const int32_t n_blocks = (args.prompt_len + B - 1) / B;
  const double max_hit_rate = static_cast<double>(n_blocks - 1) / n_blocks;
  if (!args.json && ttft) {
    std::printf("L=%d B=%d reps=%d model %s; highest reachable hit rate (L/B-1)/(L/B) = %.4f\n",
                args.prompt_len, B, args.reps, args.generator.model.c_str(), max_hit_rate);
    std::printf(
        "| phi | hit rate | TTFT off ms | TTFT on ms | speedup | ideal on ms (off x (1-phi)) "
        "|\n|---|---|---|---|---|---|\n");
  } else if (!args.json) {
    std::printf(
        "L=%d D=%d N=%d B=%d reps=%d model %s (gen tokens/s: generated tokens / session time, "
        "prefill included, all sessions together)\n",
        args.prompt_len, args.decode_len, args.n_sessions, B, args.reps,
        args.generator.model.c_str());
    std::printf(
        "| phi | shared tokens | cache | prefill tokens | cached tokens | blocks allocated | "
        "blocks acquired | allocations/op | TTFT ms | gen tokens/s | outputs |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n");
  }
  for (const PhiPoint& point : *points) {
    std::vector<OpFigures> off, on;
    {
      ProgressBar progress("phi " + point.label, static_cast<uint64_t>(2 * args.reps));
      for (int rep = 0; rep < args.reps; ++rep) {
        Result<OpFigures> a = run_op(args, point, false);
        progress.update(static_cast<uint64_t>(2 * rep + 1));
        Result<OpFigures> b = a.ok() ? run_op(args, point, true) : a;
        progress.update(static_cast<uint64_t>(2 * rep + 2));
        if (!a.ok() || !b.ok()) {
          std::fprintf(stderr, "error: %s\n", (a.ok() ? b : a).error().message.c_str());
          return 1;
        }
        off.push_back(std::move(a).value());
        on.push_back(std::move(b).value());
      }
    }
    bool identical = true;
    for (int rep = 0; rep < args.reps; ++rep) identical &= off[rep].outputs == on[rep].outputs;
    nlohmann::json row = {{"phi", point.label},
                          {"effective_phi", point.effective_phi},
                          {"prefix_blocks", point.prefix_blocks},
                          {"shared_tokens", point.prefix_tokens},
                          {"cache_off", figures_json(off)},
                          {"cache_on", figures_json(on)},
                          {"outputs_identical", identical}};
    results.push_back(row);
    if (!args.json && ttft) {
      const double off_ms = row["cache_off"]["ttft_ms"].get<double>();
      const double on_ms = row["cache_on"]["ttft_ms"].get<double>();
      const double hit = static_cast<double>(row["cache_on"]["cached_tokens"].get<int64_t>()) /
                         (static_cast<double>(args.prompt_len) * args.n_sessions);
      std::printf("| %.3f | %.3f | %.1f ± %.1f | %.1f ± %.1f | %.2fx | %.1f |\n",
                  point.effective_phi, hit, off_ms,
                  row["cache_off"]["ttft_ms_stddev"].get<double>(), on_ms,
                  row["cache_on"]["ttft_ms_stddev"].get<double>(), on_ms > 0 ? off_ms / on_ms : 0.0,
                  off_ms * (1 - point.effective_phi));
      std::fflush(stdout);
    } else if (!args.json) {
      for (const char* mode : {"cache_off", "cache_on"}) {
        const nlohmann::json& f = row[mode];
        std::printf(
            "| %.3f | %d | %s | %lld | %lld | %lld | %lld | %lld | %.1f ± %.1f | %.2f ± %.2f | %s "
            "|\n",
            point.effective_phi, point.prefix_tokens,
            mode == std::string("cache_on") ? "on" : "off", f["prefill_tokens"].get<long long>(),
            f["cached_tokens"].get<long long>(), f["kv_blocks_allocated"].get<long long>(),
            f["kv_blocks_acquired"].get<long long>(), f["heap_allocations"].get<long long>(),
            f["ttft_ms"].get<double>(), f["ttft_ms_stddev"].get<double>(),
            f["generation_tokens_per_s"].get<double>(),
            f["generation_tokens_per_s_stddev"].get<double>(),
            identical ? "identical" : "DIFFERENT");
      }
      std::fflush(stdout);
    }
  }
  nlohmann::json out = {{"bench", args.bench},
                        {"max_hit_rate", max_hit_rate},
                        {"L", args.prompt_len},
                        {"D", args.decode_len},
                        {"N", args.n_sessions},
                        {"B", B},
                        {"reps", args.reps},
                        {"sequential", args.sequential},
                        {"threads", args.generator.threads},
                        {"machine", machine_json()},
                        {"commit", source_commit()},
                        {"points", results}};
  Result<nlohmann::json> model = model_file_json(args.generator.model);
  out["model"] = model.ok() ? *model : nlohmann::json{{"path", args.generator.model}};
  if (args.json) std::printf("%s\n", out.dump().c_str());
  Result<std::string> dir =
      write_results(args.out, out["bench"].get<std::string>(), out, results_table(out));
  if (!dir.ok()) {
    std::fprintf(stderr, "error: %s\n", dir.error().message.c_str());
    return 1;
  }
  // A missing or failing gnuplot only warns: the figures are a convenience beside the data.
  if (ttft) {
    plot_ttft(*dir, out);
  } else {
    plot_phi(*dir, out);
  }
  for (const nlohmann::json& row : results) {
    if (!row["outputs_identical"].get<bool>()) {
      std::fprintf(stderr, "error: outputs differ with the cache on (phi %s)\n",
                   row["phi"].get<std::string>().c_str());
      return 1;
    }
  }
  return 0;
}

// The options both commands share.
void add_phi_options(CLI::App& cmd, const std::shared_ptr<PhiArgs>& args) {
  args->generator.add_to(cmd, /*model_required=*/false);
  args->generator.add_scheduler_options(cmd);
  cmd.add_option("-L", args->prompt_len, "Prompt length in tokens")->capture_default_str();
  cmd.add_option("--phi", args->phi_list, "Shared fractions: numbers in [0, 1] and/or max")
      ->capture_default_str();
  cmd.add_option("--reps", args->reps, "Repetitions per point")->capture_default_str();
  cmd.add_flag("--json", args->json, "Print one JSON object");
  cmd.add_option("--out", args->out,
                 "Folder for results.json, results.csv and the PNG plot (default "
                 "bench-results/<bench>-<time>)");
}

}  // namespace

void add_bench_phi_command(CLI::App& bench, int& exit_code) {
  CLI::App* cmd = bench.add_subcommand(
      "phi", "Prefix cache gain vs the shared-prefix fraction (cache off and on, one run)");
  auto args = std::make_shared<PhiArgs>();
  add_phi_options(*cmd, args);
  cmd->add_option("-D", args->decode_len, "Tokens generated per session")->capture_default_str();
  cmd->add_option("-N", args->n_sessions, "Sessions per op")->capture_default_str();
  cmd->add_flag("--sequential", args->sequential,
                "Run the sessions one after another instead of all at once");
  cmd->callback([&exit_code, args] { exit_code = run_phi(*args); });

  CLI::App* ttft = bench.add_subcommand(
      "ttft", "Time to first token of one request sharing phi of a cached prompt (off vs on)");
  auto ttft_args = std::make_shared<PhiArgs>();
  ttft_args->bench = "ttft";
  ttft_args->n_sessions = 1;
  ttft_args->decode_len = 1;
  ttft_args->reps = 5;
  ttft_args->phi_list = "0,0.25,0.5,0.75,max";
  add_phi_options(*ttft, ttft_args);
  ttft->callback([&exit_code, ttft_args] { exit_code = run_phi(*ttft_args); });
}

}  // namespace trellis::cli
