// `trellis demo`: the README's first command. Creates the built-in default model when it is
// missing (or uses -m FILE), prints its summary, tokenizes a sample prompt and generates from it.
#include <cstdio>
#include <string>

#include "commands.h"
#include "engine_options.h"
#include "model_summary.h"

namespace trellis::cli {
namespace {

constexpr const char* kSamplePrompt =
    "Once upon a time, a little cache shared its prefix with everyone.";

void print_tokens(const Tokenizer& tok, const std::vector<TokenId>& ids) {
  std::printf("== tokenizing a sample prompt\nprompt: %s\n%zu tokens:", kSamplePrompt, ids.size());
  for (TokenId id : ids) std::printf(" %d", id);
  std::printf("\npieces:");
  for (TokenId id : ids) std::printf(" [%s]", tok.token_to_piece(id, true).c_str());
  std::printf("\n\n");
}

int run_demo(EngineOptions& options) {
  const bool own_model = options.model.empty();
  if (own_model) {
    options.model = default_model_path();
    Status status = ensure_default_model(options.model);
    if (!status.ok()) {
      std::fprintf(stderr, "error: %s\n", status.error().message.c_str());
      return 1;
    }
  }
  std::unique_ptr<Engine> engine = options.open_engine();
  if (!engine) return 1;
  std::printf("== model\n%s\n", model_summary_text(engine->file()).c_str());
  EngineRequest request;
  request.prompt =
      engine->tokenizer().encode(kSamplePrompt, /*add_special=*/true, /*parse_special=*/false);
  print_tokens(engine->tokenizer(), request.prompt);

  std::printf("== generating 32 tokens (greedy) on %d threads\n", engine->n_threads());
  if (own_model) {
    std::printf("(the default model has random weights: expect fluent nonsense, not meaning)\n");
  }
  request.max_tokens = 32;
  request.sampling.temperature = 0.0f;
  request.ignore_eos = true;
  std::printf("%s", kSamplePrompt);
  Result<RequestOutput> out = engine->run(std::move(request), print_streamed);
  if (!out.ok()) {
    std::fprintf(stderr, "\nerror: %s\n", out.error().message.c_str());
    return 1;
  }
  const RequestStats& s = out->stats;
  std::printf(
      "\n\nprompt: %d tokens at %.1f tokens/s; generation: %d tokens at %.1f tokens/s; "
      "first token after %.0f ms\n",
      s.n_prompt_tokens, s.prefill_tokens_per_s(), s.n_generated_tokens, s.decode_tokens_per_s(),
      s.ttft_ms);
  return 0;
}

}  // namespace

void add_demo_command(CLI::App& app, int& exit_code) {
  CLI::App* demo =
      app.add_subcommand("demo", "Show the engine at work on the default model (or -m FILE)");
  auto options = std::make_shared<EngineOptions>();
  options->add_to(*demo, /*model_required=*/false);
  demo->callback([&exit_code, options] { exit_code = run_demo(*options); });
}

}  // namespace trellis::cli
