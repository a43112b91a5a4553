// `trellis tokenize` and `trellis detokenize`.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "load_tokenizer.h"

namespace trellis::cli {
namespace {

struct TokenizeArgs {
  std::string model;
  std::string text;
  bool no_bos = false;
  bool json = false;
  bool parse_special = false;
};

int run_tokenize(const TokenizeArgs& args) {
  Result<std::unique_ptr<Tokenizer>> tokenizer = load_tokenizer(args.model);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "error: %s\n", tokenizer.error().message.c_str());
    return 1;
  }
  const Tokenizer& tok = **tokenizer;
  std::vector<TokenId> ids = tok.encode(args.text, !args.no_bos, args.parse_special);
  if (args.json) {
    nlohmann::json out = nlohmann::json::array();
    for (TokenId id : ids) {
      out.push_back({{"id", id}, {"piece", tok.token_to_piece(id, /*render_special=*/true)}});
    }
    // Byte tokens may hold partial UTF-8: replace rather than fail.
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::string line;
  for (TokenId id : ids) line += (line.empty() ? "" : " ") + std::to_string(id);
  std::printf("%s\n", line.c_str());
  return 0;
}

int run_detokenize(const std::string& model, const std::vector<int64_t>& raw_ids) {
  Result<std::unique_ptr<Tokenizer>> tokenizer = load_tokenizer(model);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "error: %s\n", tokenizer.error().message.c_str());
    return 1;
  }
  const int32_t n_vocab = (*tokenizer)->vocab().size();
  std::vector<TokenId> ids;
  for (int64_t id : raw_ids) {
    if (id < 0 || id >= n_vocab) {
      std::fprintf(stderr, "error: token id %lld is outside the vocab (0..%d)\n",
                   static_cast<long long>(id), n_vocab - 1);
      return 1;
    }
    ids.push_back(static_cast<TokenId>(id));
  }
  std::printf("%s\n", (*tokenizer)->decode(ids).c_str());
  return 0;
}

}  // namespace

void add_tokenize_commands(CLI::App& app, int& exit_code) {
  CLI::App* tokenize = app.add_subcommand("tokenize", "Print the token ids of a text");
  auto args = std::make_shared<TokenizeArgs>();
  tokenize->add_option("-m,--model", args->model, "GGUF file with a tokenizer")->required();
  tokenize->add_option("text", args->text, "Text to tokenize")->required();
  tokenize->add_flag("--no-bos", args->no_bos, "Do not add BOS/EOS");
  tokenize->add_flag("--json", args->json, "Print ids and pieces as JSON");
  tokenize->add_flag("--parse-special", args->parse_special,
                     "Text spelling a special token becomes that token");
  tokenize->callback([&exit_code, args] { exit_code = run_tokenize(*args); });

  CLI::App* detokenize = app.add_subcommand("detokenize", "Print the text of token ids");
  auto model = std::make_shared<std::string>();
  auto ids = std::make_shared<std::vector<int64_t>>();
  detokenize->add_option("-m,--model", *model, "GGUF file with a tokenizer")->required();
  detokenize->add_option("ids", *ids, "Token ids")->required();
  detokenize->callback([&exit_code, model, ids] { exit_code = run_detokenize(*model, *ids); });
}

}  // namespace trellis::cli
