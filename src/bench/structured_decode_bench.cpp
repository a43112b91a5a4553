#include "bench/structured_decode_bench.h"

#include <algorithm>
#include <array>
#include <memory>
#include <nlohmann/json.hpp>

#include "bench/requests.h"
#include "bench/structured_schemas.h"

namespace trellis::bench {

namespace structured_decode_detail {
namespace {

// FREE_JUMP: free text as long as the jump-forward outputs (which may differ from the others).
enum class Mode { FREE, CONSTRAINED, JUMP_FORWARD, FREE_JUMP };
constexpr size_t kModes = 4;

// What one run (a batch of requests submitted at once) measured.
struct RunFigures {
  double tokens_per_s = 0;
  double request_ms = 0;
  int64_t generated_tokens = 0;
  int64_t forced_tokens = 0;
  int64_t engine_steps = 0;
  std::vector<RequestOutput> outputs;  // in request order
};

Status check_options(const DecodeBenchOptions& options) {
  if (options.max_tokens < 2) return Error{"-n must be at least 2"};
  if (options.repeats < 1) return Error{"--repeats must be at least 1"};
  if (options.batch_sizes.empty()) return Error{"give at least one batch size"};
  for (int32_t b : options.batch_sizes) {
    if (b < 1) return Error{"batch sizes must be at least 1"};
  }
  return {};
}

int32_t max_batch(const DecodeBenchOptions& options) {
  return *std::max_element(options.batch_sizes.begin(), options.batch_sizes.end());
}

// Both engines: every request of the largest batch running at once (never preempted), a small
// context unless one was asked for.
EngineConfig sized_config(const DecodeBenchOptions& options, bool jump_forward) {
  EngineConfig config = options.engine;
  config.jump_forward = jump_forward;
  if (config.n_ctx == 0) config.n_ctx = 512 + options.max_tokens;
  config.scheduler.max_seqs = std::max(config.scheduler.max_seqs, max_batch(options));
  return config;
}

// Prompt i: the prompt, then the request's index (so that the outputs of a batch differ).
std::vector<std::vector<TokenId>> make_prompts(const Tokenizer& tokenizer, const std::string& text,
                                               int32_t n) {
  std::vector<std::vector<TokenId>> prompts;
  for (int32_t i = 0; i < n; ++i) {
    const std::string prompt = text + " Customer #" + std::to_string(i + 1) + ":\n";
    prompts.push_back(tokenizer.encode(prompt, /*add_special=*/true, /*parse_special=*/false));
  }
  return prompts;
}

// The first n requests of `mode`: free text generates lengths[i] tokens, EOS ignored; constrained
// requests stop where the grammar completes (or at max_tokens). `lengths` is unused for them.
std::vector<EngineRequest> make_requests(Mode mode, int32_t n,
                                         const std::vector<std::vector<TokenId>>& prompts,
                                         const std::vector<int32_t>& lengths, int32_t max_tokens,
                                         const std::shared_ptr<const Grammar>& grammar) {
  std::vector<EngineRequest> requests;
  for (int32_t i = 0; i < n; ++i) {
    const auto k = static_cast<size_t>(i);
    if (mode == Mode::FREE || mode == Mode::FREE_JUMP) {
      requests.push_back(greedy_request(prompts[k], lengths[k]));
    } else {
      EngineRequest r = greedy_request(prompts[k], max_tokens);
      r.ignore_eos = false;
      r.grammar = grammar;
      requests.push_back(std::move(r));
    }
  }
  return requests;
}

// Submits every request at once and waits for them all.
Result<RunFigures> run_batch(Engine& engine, std::vector<EngineRequest> requests) {
  const EngineStats before = engine.stats();
  std::vector<RequestHandle> handles;
  for (EngineRequest& r : requests) {
    Result<RequestHandle> handle = engine.submit(std::move(r));
    if (!handle.ok()) return handle.error();
    handles.push_back(*handle);
  }
  RunFigures run;
  double first_token_ms = 0;
  double end_ms = 0;
  int64_t decode_tokens = 0;
  for (size_t i = 0; i < handles.size(); ++i) {
    const RequestOutput& out = handles[i].wait();
    TRELLIS_TRY(output_status(out));
    const RequestStats& s = out.stats;
    first_token_ms = i == 0 ? s.ttft_ms : std::min(first_token_ms, s.ttft_ms);
    end_ms = std::max(end_ms, s.total_ms);
    run.generated_tokens += s.n_generated_tokens;
    decode_tokens += std::max(0, s.n_generated_tokens - 1);
    run.request_ms += s.total_ms / static_cast<double>(handles.size());
    run.outputs.push_back(out);
  }
  const EngineStats after = engine.stats();
  const double decode_ms = end_ms - first_token_ms;
  run.tokens_per_s = decode_ms > 0 ? static_cast<double>(decode_tokens) * 1000.0 / decode_ms : 0.0;
  run.forced_tokens = after.n_forced_tokens - before.n_forced_tokens;
  run.engine_steps = after.n_steps - before.n_steps;
  return run;
}

// The two engines and what every run shares.
struct Setup {
  std::unique_ptr<Engine> off;  // jump-forward off: free text and constrained
  std::unique_ptr<Engine> on;   // jump-forward on
  std::shared_ptr<const Grammar> grammar;
  std::vector<std::vector<TokenId>> prompts;
  std::vector<int32_t> lengths;       // of the constrained outputs (jump-forward off)
  std::vector<int32_t> jump_lengths;  // of the jump-forward outputs
};

Result<Setup> set_up(const DecodeBenchOptions& options) {
  Setup setup;
  Result<Grammar> grammar = compile_json_schema(person_schema().schema);
  if (!grammar.ok()) return Error{"schema person: " + grammar.error().message};
  setup.grammar = std::make_shared<const Grammar>(std::move(grammar).value());
  for (const bool jump_forward : {false, true}) {
    Result<std::unique_ptr<Engine>> engine =
        Engine::create(options.model_path, sized_config(options, jump_forward));
    if (!engine.ok()) return engine.error();
    (jump_forward ? setup.on : setup.off) = std::move(engine).value();
  }
  setup.prompts = make_prompts(setup.off->tokenizer(), options.prompt, max_batch(options));
  return setup;
}

// The constrained requests once on each engine, uncounted: each engine's mask cache for the
// grammar is filled and the outputs' lengths known (free text needs no warming beyond the model's
// pages, which the first run brings in).
Status calibrate(const DecodeBenchOptions& options, Setup& setup, DecodeBenchResult& result,
                 const Observer& observer) {
  const int32_t n = max_batch(options);
  observer.report_progress("decode warm-up", 0, 2);
  Result<RunFigures> constrained = run_batch(
      *setup.off,
      make_requests(Mode::CONSTRAINED, n, setup.prompts, {}, options.max_tokens, setup.grammar));
  if (!constrained.ok()) return constrained.error();
  result.sample_output = constrained->outputs[0].text;
  for (const RequestOutput& out : constrained->outputs) {
    setup.lengths.push_back(out.stats.n_generated_tokens);
    if (out.finish_reason != FinishReason::STOP) continue;
    ++result.n_complete;
    if (nlohmann::json::accept(out.text)) ++result.n_valid_json;
  }
  observer.report_progress("decode warm-up", 1, 2);
  Result<RunFigures> jump = run_batch(
      *setup.on,
      make_requests(Mode::CONSTRAINED, n, setup.prompts, {}, options.max_tokens, setup.grammar));
  if (!jump.ok()) return jump.error();
  for (const RequestOutput& out : jump->outputs)
    setup.jump_lengths.push_back(out.stats.n_generated_tokens);
  observer.report_progress("decode warm-up", 2, 2);
  for (const std::vector<TokenId>& p : setup.prompts)
    result.prompt_tokens.push_back(static_cast<int32_t>(p.size()));
  result.lengths = setup.lengths;
  result.jump_forward_lengths = setup.jump_lengths;
  return {};
}

DecodeModeStats summarize(const std::vector<RunFigures>& runs) {
  DecodeModeStats s;
  std::vector<double> speeds, times;
  for (const RunFigures& r : runs) {
    speeds.push_back(r.tokens_per_s);
    times.push_back(r.request_ms);
    s.generated_tokens +=
        static_cast<double>(r.generated_tokens) / static_cast<double>(runs.size());
    s.forced_tokens += static_cast<double>(r.forced_tokens) / static_cast<double>(runs.size());
    s.engine_steps += static_cast<double>(r.engine_steps) / static_cast<double>(runs.size());
  }
  s.tokens_per_s = stats(speeds);
  s.request_ms = stats(times);
  return s;
}

// The median over cycles of field(a[i]) / field(b[i]); 0 where a denominator is 0.
double median_ratio(const std::vector<RunFigures>& a, const std::vector<RunFigures>& b,
                    double RunFigures::*field) {
  std::vector<double> ratios;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    ratios.push_back(b[i].*field > 0 ? a[i].*field / (b[i].*field) : 0.0);
  return percentile(ratios, 0.5);
}

// `repeats` cycles of the four modes at batch size n, the order reversed every other cycle.
Result<DecodeBatchResult> run_batch_size(const DecodeBenchOptions& options, Setup& setup, int32_t n,
                                         const Observer& observer) {
  std::array<std::vector<RunFigures>, kModes> runs;  // by Mode
  const std::string stage = "decode B=" + std::to_string(n);
  const auto total = static_cast<uint64_t>(options.repeats);
  observer.report_progress(stage, 0, total);
  for (int32_t cycle = 0; cycle < options.repeats; ++cycle) {
    std::array<Mode, kModes> order = {Mode::FREE, Mode::CONSTRAINED, Mode::JUMP_FORWARD,
                                      Mode::FREE_JUMP};
    if (cycle % 2 == 1) std::reverse(order.begin(), order.end());
    for (const Mode mode : order) {
      Engine& engine = mode == Mode::JUMP_FORWARD ? *setup.on : *setup.off;
      const std::vector<int32_t>& lengths =
          mode == Mode::FREE_JUMP ? setup.jump_lengths : setup.lengths;
      Result<RunFigures> run = run_batch(engine, make_requests(mode, n, setup.prompts, lengths,
                                                               options.max_tokens, setup.grammar));
      if (!run.ok()) return run.error();
      run->outputs.clear();
      runs[static_cast<size_t>(mode)].push_back(std::move(run).value());
    }
    observer.report_progress(stage, static_cast<uint64_t>(cycle) + 1, total);
  }
  const auto& free_runs = runs[static_cast<size_t>(Mode::FREE)];
  const auto& constrained_runs = runs[static_cast<size_t>(Mode::CONSTRAINED)];
  const auto& jump_runs = runs[static_cast<size_t>(Mode::JUMP_FORWARD)];
  const auto& free_jump_runs = runs[static_cast<size_t>(Mode::FREE_JUMP)];
  DecodeBatchResult result;
  result.batch_size = n;
  result.free_text = summarize(free_runs);
  result.constrained = summarize(constrained_runs);
  result.jump_forward = summarize(jump_runs);
  result.free_jump_lengths = summarize(free_jump_runs);
  result.constrained_speed_ratio =
      median_ratio(constrained_runs, free_runs, &RunFigures::tokens_per_s);
  result.jump_forward_time_ratio =
      median_ratio(jump_runs, constrained_runs, &RunFigures::request_ms);
  result.jump_forward_free_ratio = median_ratio(jump_runs, free_jump_runs, &RunFigures::request_ms);
  return result;
}

}  // namespace
}  // namespace structured_decode_detail

Result<DecodeBenchResult> run_decode_bench(const DecodeBenchOptions& options,
                                           const Observer& observer) {
  namespace d = structured_decode_detail;
  TRELLIS_TRY(d::check_options(options));
  Result<d::Setup> setup = d::set_up(options);
  if (!setup.ok()) return setup.error();
  DecodeBenchResult result;
  result.n_threads = setup->off->n_threads();
  result.n_vocab = setup->off->tokenizer().vocab().size();
  TRELLIS_TRY(d::calibrate(options, *setup, result, observer));
  for (const int32_t n : options.batch_sizes) {
    Result<DecodeBatchResult> batch = d::run_batch_size(options, *setup, n, observer);
    if (!batch.ok()) return batch.error();
    result.batches.push_back(*batch);
  }
  return result;
}

}  // namespace trellis::bench
