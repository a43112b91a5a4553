// `trellis generate`: text from prompts, streamed, with timings; `--json` for programs.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "commands.h"
#include "generator_options.h"

namespace trellis::cli {
namespace {

struct GenerateArgs {
  GeneratorOptions generator;
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
};

// A prompt as text (tokenized with BOS unless --no-bos) or as token ids (used as given).
struct PromptInput {
  std::string text;
  std::vector<TokenId> tokens;
  bool is_tokens = false;
};

// One JSON value per line: a string, or an array of token ids.
Result<std::vector<PromptInput>> read_prompts_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{path + ": cannot open"};
  std::vector<PromptInput> prompts;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(line_no);
    nlohmann::json value = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    PromptInput prompt;
    if (value.is_string()) {
      prompt.text = value.get<std::string>();
    } else if (value.is_array() && !value.empty()) {
      prompt.is_tokens = true;
      for (const nlohmann::json& id : value) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
          return Error{where + ": token ids must be non-negative integers"};
        prompt.tokens.push_back(id.get<TokenId>());
      }
    } else {
      return Error{where + ": expected a JSON string or a non-empty array of token ids per line"};
    }
    prompts.push_back(std::move(prompt));
  }
  return prompts;
}

nlohmann::json timings_json(const GenerationTimings& t) {
  return {{"prompt_tokens_per_s", t.prompt_tokens_per_s()},
          {"generation_tokens_per_s", t.generation_tokens_per_s()},
          {"ttft_ms", t.ttft_ms},
          {"prompt_ms", t.prompt_ms},
          {"generation_ms", t.generation_ms}};
}

int run_generate(GenerateArgs& args) {
  std::vector<PromptInput> prompts;
  for (const std::string& text : args.prompts) prompts.push_back({text, {}, false});
  if (!args.prompts_file.empty()) {
    Result<std::vector<PromptInput>> more = read_prompts_file(args.prompts_file);
    if (!more.ok()) {
      std::fprintf(stderr, "error: %s\n", more.error().message.c_str());
      return 1;
    }
    prompts.insert(prompts.end(), more->begin(), more->end());
  }
  if (prompts.empty()) {
    std::fprintf(stderr, "error: give a prompt with -p TEXT or --prompts-file FILE\n");
    return 1;
  }
  std::unique_ptr<Generator> generator = args.generator.open();
  if (!generator) return 1;
  Generator& gen = *generator;
  const uint64_t seed = args.seed >= 0 ? static_cast<uint64_t>(args.seed) : std::random_device{}();

  for (const PromptInput& prompt : prompts) {
    GenerationRequest request;
    request.prompt = prompt.is_tokens ? prompt.tokens
                                      : gen.tokenizer().encode(prompt.text, !args.no_bos,
                                                               /*parse_special=*/false);
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
    if (!args.json) {
      std::printf("%s", prompt.is_tokens ? gen.tokenizer().decode(prompt.tokens).c_str()
                                         : prompt.text.c_str());
      std::fflush(stdout);
    }
    Result<GenerationResult> result = gen.generate(request, [&](std::string_view text) {
      if (!args.json) print_streamed(text);
      return true;
    });
    if (!result.ok()) {
      std::fprintf(stderr, "\nerror: %s\n", result.error().message.c_str());
      return 1;
    }
    const GenerationTimings& t = result->timings;
    if (args.json) {
      nlohmann::json out = {{"prompt", prompt.is_tokens ? nlohmann::json(prompt.tokens)
                                                        : nlohmann::json(prompt.text)},
                            {"prompt_tokens", request.prompt},
                            {"generated_tokens", result->tokens},
                            {"text", result->text},
                            {"finish_reason", result->finish_reason},
                            {"cached_tokens", result->kv.n_cached_tokens},
                            {"kv_blocks_allocated", result->kv.n_blocks_allocated},
                            {"kv_blocks_acquired", result->kv.n_blocks_acquired},
                            {"seed", seed},
                            {"timings", timings_json(t)}};
      std::printf("%s\n",
                  out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      std::printf("\n");
      std::fprintf(stderr,
                   "[prompt %d tokens (%d cached), %.1f tokens/s | generated %d tokens, %.1f "
                   "tokens/s | first token after %.0f ms | %s]\n",
                   t.n_prompt_tokens, result->kv.n_cached_tokens, t.prompt_tokens_per_s(),
                   t.n_generated_tokens, t.generation_tokens_per_s(), t.ttft_ms,
                   result->finish_reason.c_str());
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("generate", "Generate text from prompts");
  auto args = std::make_shared<GenerateArgs>();
  args->generator.add_to(*cmd, /*model_required=*/false);
  cmd->add_option("-p,--prompt", args->prompts, "Prompt (repeatable; run in order)");
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
