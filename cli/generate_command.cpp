// `trellis generate`: text from prompts, streamed, with timings; `--json` for programs.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "commands.h"
#include "engine_options.h"
#include "prompt_input.h"

namespace trellis::cli {
namespace {

struct GenerateArgs {
  EngineOptions engine;
  std::vector<std::string> prompts;
  std::vector<std::string> stop;
  std::string prompts_file;
  int32_t n_predict = 128;
  float temperature = 0.8f;
  int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  int32_t repeat_last_n = 64;
  int64_t seed = -1;
  bool json = false;
  bool no_bos = false;
  bool ignore_eos = false;
  bool parallel = false;
  int32_t fork = 1;
};

nlohmann::json timings_json(const RequestStats& s) {
  return {{"prompt_tokens_per_s", s.prefill_tokens_per_s()},
          {"generation_tokens_per_s", s.decode_tokens_per_s()},
          {"queue_ms", s.queue_ms},
          {"ttft_ms", s.ttft_ms},
          {"disk_load_ms", s.disk_load_ms},
          {"prompt_ms", s.prefill_ms()},
          {"generation_ms", s.decode_ms()},
          {"total_ms", s.total_ms}};
}

EngineRequest make_request(const GenerateArgs& args, std::vector<TokenId> prompt, uint64_t seed) {
  EngineRequest request;
  request.prompt = std::move(prompt);
  request.max_tokens = args.n_predict;
  request.ignore_eos = args.ignore_eos;
  request.stop = args.stop;
  SamplingParams& s = request.sampling;
  s.temperature = args.temperature;
  s.top_k = args.top_k;
  s.top_p = args.top_p;
  s.min_p = args.min_p;
  s.repetition_penalty = args.repeat_penalty;
  s.frequency_penalty = args.frequency_penalty;
  s.presence_penalty = args.presence_penalty;
  s.penalty_last_n = args.repeat_last_n;
  s.seed = seed;
  return request;
}

// One line of --json output, or the text and figures for people.
void print_output(const GenerateArgs& args, const PromptInput& prompt,
                  const std::vector<TokenId>& prompt_tokens, int sample, uint64_t seed,
                  const RequestOutput& out, bool text_was_streamed) {
  const RequestStats& s = out.stats;
  if (args.json) {
    nlohmann::json line = {
        {"prompt", prompt.is_tokens ? nlohmann::json(prompt.tokens) : nlohmann::json(prompt.text)},
        {"prompt_tokens", prompt_tokens},
        {"generated_tokens", out.tokens},
        {"text", out.text},
        {"finish_reason", finish_reason_name(out.finish_reason)},
        {"cached_tokens", s.n_cached_tokens},
        {"disk_cached_tokens", s.n_disk_cached_tokens},
        {"kv_blocks_allocated", s.n_blocks_allocated},
        {"kv_blocks_acquired", s.n_blocks_acquired},
        {"draft_tokens", s.n_draft_tokens},
        {"accepted_draft_tokens", s.n_accepted_tokens},
        {"queue_ms", s.queue_ms},
        {"seed", seed},
        {"timings", timings_json(s)}};
    if (args.fork > 1) line["sample"] = sample;
    std::printf("%s\n",
                line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    if (!text_was_streamed) {
      if (args.fork > 1) std::printf("[sample %d] ", sample);
      std::printf("%s%s", prompt.text.c_str(), out.text.c_str());
    }
    std::printf("\n");
    std::fprintf(stderr,
                 "[prompt %d tokens (%d cached, %d from disk), %.1f tokens/s | generated %d "
                 "tokens, %.1f tokens/s, %d of %d drafted tokens kept | first token after %.0f ms "
                 "(%.0f ms queued) | %s]\n",
                 s.n_prompt_tokens, s.n_cached_tokens, s.n_disk_cached_tokens,
                 s.prefill_tokens_per_s(), s.n_generated_tokens, s.decode_tokens_per_s(),
                 s.n_accepted_tokens, s.n_draft_tokens, s.ttft_ms, s.queue_ms,
                 std::string(finish_reason_name(out.finish_reason)).c_str());
  }
  std::fflush(stdout);
}

// Submits one prompt (forked into args.fork samples); streams its text when `stream`.
Result<std::vector<RequestHandle>> submit(Engine& engine, const GenerateArgs& args,
                                          const std::vector<TokenId>& tokens, uint64_t seed,
                                          bool stream) {
  EngineRequest request = make_request(args, tokens, seed);
  if (args.fork > 1) return engine.fork(std::move(request), args.fork);
  std::function<void(std::string_view)> on_text;
  if (stream) on_text = [](std::string_view text) { print_streamed(text); };
  Result<RequestHandle> handle = engine.submit(std::move(request), std::move(on_text));
  if (!handle.ok()) return handle.error();
  return std::vector<RequestHandle>{*handle};
}

int run_generate(GenerateArgs& args) {
  if (!args.engine.join_pipeline()) return 1;  // other ranks run their stage and exit here
  Result<std::vector<PromptInput>> collected = collect_prompts(args.prompts, args.prompts_file);
  if (!collected.ok()) {
    std::fprintf(stderr, "error: %s\n", collected.error().message.c_str());
    return 1;
  }
  std::vector<PromptInput> prompts = std::move(collected).value();
  if (args.fork < 1) {
    std::fprintf(stderr, "error: --fork must be at least 1\n");
    return 1;
  }
  std::unique_ptr<Engine> engine = args.engine.open_engine([](EngineConfig&) {});
  if (!engine) return 1;
  const uint64_t seed = args.seed >= 0 ? static_cast<uint64_t>(args.seed) : std::random_device{}();
  std::vector<std::vector<TokenId>> tokens;
  for (PromptInput& prompt : prompts) {
    tokens.push_back(prompt.is_tokens ? prompt.tokens
                                      : engine->tokenizer().encode(prompt.text, !args.no_bos,
                                                                   /*parse_special=*/false));
    if (prompt.is_tokens) prompt.text = engine->tokenizer().decode(prompt.tokens);
  }
  // Sequential: each prompt ends before the next starts (its text streams as it comes).
  // Parallel: all are submitted at once and share the engine's batches; output keeps their order.
  const bool stream = !args.json && !args.parallel && args.fork == 1;
  std::vector<std::vector<RequestHandle>> handles(prompts.size());
  auto wait_and_print = [&](size_t i) {
    for (size_t k = 0; k < handles[i].size(); ++k) {
      const RequestOutput& out = handles[i][k].wait();
      if (out.finish_reason == FinishReason::ERROR) {
        std::fprintf(stderr, "\nerror: %s\n", out.error.c_str());
        return false;
      }
      print_output(args, prompts[i], tokens[i], static_cast<int>(k), seed, out, stream);
    }
    return true;
  };
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (stream) {
      std::printf("%s", prompts[i].text.c_str());
      std::fflush(stdout);
    }
    Result<std::vector<RequestHandle>> submitted = submit(*engine, args, tokens[i], seed, stream);
    if (!submitted.ok()) {
      std::fprintf(stderr, "\nerror: %s\n", submitted.error().message.c_str());
      return 1;
    }
    handles[i] = std::move(submitted).value();
    if (!args.parallel && !wait_and_print(i)) return 1;
  }
  if (args.parallel) {
    for (size_t i = 0; i < prompts.size(); ++i) {
      if (!wait_and_print(i)) return 1;
    }
  }
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("generate", "Generate text from prompts");
  auto args = std::make_shared<GenerateArgs>();
  args->engine.add_to(*cmd, /*model_required=*/false);
  args->engine.add_pipeline_options(*cmd);
  args->engine.add_scheduler_options(*cmd);
  args->engine.add_disk_tier_options(*cmd);
  cmd->add_option("-p,--prompt", args->prompts, "Prompt (repeatable; run in order)");
  cmd->add_flag("--parallel", args->parallel,
                "Submit all prompts at once: they run concurrently, sharing batches and the cache");
  cmd->add_option("--fork", args->fork,
                  "Samples per prompt, sharing the prompt's KV blocks (seeds derived per sample)")
      ->capture_default_str();
  cmd->add_option("--prompts-file", args->prompts_file,
                  "File with one prompt per line: a JSON string, or a JSON array of token ids");
  cmd->add_option("-n,--n-predict", args->n_predict, "Tokens to generate at most")
      ->capture_default_str();
  cmd->add_option("--temp", args->temperature, "Temperature (0: greedy)")->capture_default_str();
  cmd->add_option("--top-k", args->top_k, "Top-k (0: off)")->capture_default_str();
  cmd->add_option("--top-p", args->top_p, "Top-p (1: off)")->capture_default_str();
  cmd->add_option("--min-p", args->min_p, "Min-p (0: off)")->capture_default_str();
  cmd->add_option("--repeat-penalty", args->repeat_penalty, "Repetition penalty (1: off)")
      ->capture_default_str();
  cmd->add_option("--repeat-last-n", args->repeat_last_n, "Penalty window (-1: all)")
      ->capture_default_str();
  cmd->add_option("--frequency-penalty", args->frequency_penalty, "Frequency penalty")
      ->capture_default_str();
  cmd->add_option("--presence-penalty", args->presence_penalty, "Presence penalty")
      ->capture_default_str();
  cmd->add_option("-s,--seed", args->seed, "Sampling seed (default: random)");
  cmd->add_option("--stop", args->stop, "Stop before this text (repeatable)");
  cmd->add_flag("--json", args->json, "One JSON object per prompt instead of streamed text");
  cmd->add_flag("--no-bos", args->no_bos, "Do not add BOS to the prompt");
  cmd->add_flag("--ignore-eos", args->ignore_eos, "Keep generating after end-of-sequence");
  cmd->callback([&exit_code, args] { exit_code = run_generate(*args); });
}

}  // namespace trellis::cli
