// `trellis logits`: the top logits of prompt positions, for comparison with other implementations.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>

#include "commands.h"
#include "engine_options.h"

namespace trellis::cli {
namespace {

struct LogitsArgs {
  EngineOptions engine;
  std::string prompt;
  int32_t top = 10;
  bool all_positions = false;
  bool no_bos = false;
  bool json = true;  // accepted for clarity; JSON is the only output format
};

int run_logits(LogitsArgs& args) {
  std::unique_ptr<Engine> engine = args.engine.open_engine();
  if (!engine) return 1;
  EngineRequest request;
  request.prompt = engine->tokenizer().encode(args.prompt, !args.no_bos, false);
  request.max_tokens = 0;  // the prompt's logits only
  request.return_prompt_logits = true;
  const std::vector<TokenId> tokens = request.prompt;
  Result<RequestOutput> out = engine->run(std::move(request));
  if (!out.ok()) {
    std::fprintf(stderr, "error: %s\n", out.error().message.c_str());
    return 1;
  }
  nlohmann::json positions = nlohmann::json::array();
  const size_t first = args.all_positions ? 0 : tokens.size() - 1;
  for (size_t pos = first; pos < tokens.size(); ++pos) {
    const std::vector<float>& row = out->prompt_logits[pos];
    std::vector<int32_t> ids(row.size());
    std::iota(ids.begin(), ids.end(), 0);
    const size_t k = std::min(row.size(), static_cast<size_t>(std::max(args.top, 1)));
    // Highest logit first; equal logits in id order.
    std::partial_sort(
        ids.begin(), ids.begin() + static_cast<ptrdiff_t>(k), ids.end(), [&](int32_t a, int32_t b) {
          return row[static_cast<size_t>(a)] > row[static_cast<size_t>(b)] ||
                 (row[static_cast<size_t>(a)] == row[static_cast<size_t>(b)] && a < b);
        });
    nlohmann::json top = nlohmann::json::array();
    for (size_t j = 0; j < k; ++j) top.push_back({ids[j], row[static_cast<size_t>(ids[j])]});
    positions.push_back({{"pos", pos}, {"token", tokens[pos]}, {"top", top}});
  }
  std::printf("%s\n", nlohmann::json{{"positions", positions}}.dump().c_str());
  return 0;
}

}  // namespace

void add_logits_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd =
      app.add_subcommand("logits", "Print the top logits of the prompt's last (or every) position");
  auto args = std::make_shared<LogitsArgs>();
  args->engine.add_to(*cmd, /*model_required=*/false);
  cmd->add_option("-p,--prompt", args->prompt, "Prompt")->required();
  cmd->add_option("--top", args->top, "How many logits per position")->capture_default_str();
  cmd->add_flag("--all-positions", args->all_positions, "Every prompt position, not only the last");
  cmd->add_flag("--no-bos", args->no_bos, "Do not add BOS to the prompt");
  cmd->add_flag("--json", args->json, "Print JSON (the only format)");
  cmd->callback([&exit_code, args] { exit_code = run_logits(*args); });
}

}  // namespace trellis::cli
