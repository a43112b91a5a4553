// `trellis logits`: the top logits of prompt positions, for comparison with other implementations.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>

#include "commands.h"
#include "engine_options.h"
#include "prompt_input.h"

namespace trellis::cli {
namespace {

struct LogitsArgs {
  EngineOptions engine;
  std::vector<std::string> prompts;  // -p, repeatable
  std::string prompts_file;
  int32_t top = 10;
  bool all_positions = false;
  bool no_bos = false;
  bool json = true;  // accepted for clarity; JSON is the only output format
};

// {"positions": [{"pos", "token", "top": [[id, logit], ...]}, ...]} for the prompt's last (or
// every) position; the highest logits first, equal logits in id order.
nlohmann::json positions_json(const LogitsArgs& args, const std::vector<TokenId>& tokens,
                              const std::vector<std::vector<float>>& logits) {
  nlohmann::json positions = nlohmann::json::array();
  const size_t first = args.all_positions ? 0 : tokens.size() - 1;
  for (size_t pos = first; pos < tokens.size(); ++pos) {
    const std::vector<float>& row = logits[pos];
    std::vector<int32_t> ids(row.size());
    std::iota(ids.begin(), ids.end(), 0);
    const size_t k = std::min(row.size(), static_cast<size_t>(std::max(args.top, 1)));
    std::partial_sort(
        ids.begin(), ids.begin() + static_cast<ptrdiff_t>(k), ids.end(), [&](int32_t a, int32_t b) {
          return row[static_cast<size_t>(a)] > row[static_cast<size_t>(b)] ||
                 (row[static_cast<size_t>(a)] == row[static_cast<size_t>(b)] && a < b);
        });
    nlohmann::json top = nlohmann::json::array();
    for (size_t j = 0; j < k; ++j) top.push_back({ids[j], row[static_cast<size_t>(ids[j])]});
    positions.push_back({{"pos", pos}, {"token", tokens[pos]}, {"top", top}});
  }
  return nlohmann::json{{"positions", positions}};
}

int run_logits(LogitsArgs& args) {
  if (!args.engine.join_pipeline()) return 1;  // other ranks run their stage and exit here
  Result<std::vector<PromptInput>> collected = collect_prompts(args.prompts, args.prompts_file);
  if (!collected.ok()) {
    std::fprintf(stderr, "error: %s\n", collected.error().message.c_str());
    return 1;
  }
  std::vector<PromptInput> prompts = std::move(collected).value();
  std::unique_ptr<Engine> engine = args.engine.open_engine();
  if (!engine) return 1;
  // One JSON object per prompt, one per line.
  for (const PromptInput& prompt : prompts) {
    EngineRequest request;
    request.prompt = prompt.is_tokens
                         ? prompt.tokens
                         : engine->tokenizer().encode(prompt.text, !args.no_bos, false);
    request.max_tokens = 0;  // the prompt's logits only
    request.return_prompt_logits = true;
    const std::vector<TokenId> tokens = request.prompt;
    Result<RequestOutput> out = engine->run(std::move(request));
    if (!out.ok()) {
      std::fprintf(stderr, "error: %s\n", out.error().message.c_str());
      return 1;
    }
    std::printf("%s\n", positions_json(args, tokens, out->prompt_logits).dump().c_str());
  }
  return 0;
}

}  // namespace

void add_logits_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "logits", "Print the top logits of each prompt's last (or every) position");
  auto args = std::make_shared<LogitsArgs>();
  args->engine.add_to(*cmd, /*model_required=*/false);
  args->engine.add_pipeline_options(*cmd);
  cmd->add_option("-p,--prompt", args->prompts, "Prompt (repeatable)");
  cmd->add_option("--prompts-file", args->prompts_file,
                  "File with one prompt per line: a JSON string, or a JSON array of token ids");
  cmd->add_option("--top", args->top, "How many logits per position")->capture_default_str();
  cmd->add_flag("--all-positions", args->all_positions, "Every prompt position, not only the last");
  cmd->add_flag("--no-bos", args->no_bos, "Do not add BOS to the prompt");
  cmd->add_flag("--json", args->json, "Print JSON (the only format)");
  cmd->callback([&exit_code, args] { exit_code = run_logits(*args); });
}

}  // namespace trellis::cli
