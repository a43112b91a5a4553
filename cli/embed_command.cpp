// `trellis embed`: embeddings of texts, or a reranker's scores of documents for a query.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "commands.h"
#include "embed/embedder.h"

namespace trellis::cli {
namespace {

struct EmbedArgs {
  std::string model;
  std::vector<std::string> texts;
  std::string query;  // rerankers: the query the texts (documents) are scored against
  bool no_normalize = false;
  bool json = false;
  int threads = 0;
};

void print_embeddings(const std::vector<std::vector<float>>& vectors, bool json) {
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const std::vector<float>& v : vectors) out.push_back(v);
    std::printf("%s\n", out.dump().c_str());
    return;
  }
  for (const std::vector<float>& v : vectors) {
    std::string line;
    for (float x : v) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%s%.7g", line.empty() ? "" : " ", static_cast<double>(x));
      line += buf;
    }
    std::printf("%s\n", line.c_str());
  }
}

// Documents by falling score: "score<TAB>index<TAB>document".
void print_scores(const std::vector<std::vector<float>>& scores,
                  const std::vector<std::string>& documents, bool json) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a][0] > scores[b][0]; });
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (size_t i : order) out.push_back({{"index", i}, {"relevance_score", scores[i][0]}});
    std::printf("%s\n", out.dump().c_str());
    return;
  }
  for (size_t i : order) {
    std::printf("%.7g\t%zu\t%s\n", static_cast<double>(scores[i][0]), i, documents[i].c_str());
  }
}

int run_embed(const EmbedArgs& args) {
  Result<std::unique_ptr<Embedder>> embedder =
      Embedder::open(args.model, EmbedderOptions{.n_threads = args.threads});
  if (!embedder.ok()) {
    std::fprintf(stderr, "error: %s\n", embedder.error().message.c_str());
    return 1;
  }
  Embedder& e = **embedder;
  if (e.is_reranker() == args.query.empty()) {
    std::fprintf(stderr, "error: %s\n",
                 e.is_reranker() ? "this model is a reranker: give --query and the documents"
                                 : "--query is for rerankers; this model embeds");
    return 1;
  }
  std::vector<std::vector<TokenId>> inputs;
  for (const std::string& text : args.texts) {
    inputs.push_back(e.is_reranker() ? e.tokenize_pair(args.query, text) : e.tokenize(text));
  }
  Result<std::vector<std::vector<float>>> out = e.embed(inputs);
  if (!out.ok()) {
    std::fprintf(stderr, "error: %s\n", out.error().message.c_str());
    return 1;
  }
  if (e.is_reranker()) {
    print_scores(*out, args.texts, args.json);
    return 0;
  }
  if (!args.no_normalize) {
    for (std::vector<float>& v : *out) normalize_l2(v);
  }
  print_embeddings(*out, args.json);
  return 0;
}

}  // namespace

void add_embed_command(CLI::App& app, int& exit_code) {
  CLI::App* embed = app.add_subcommand(
      "embed",
      "Embed texts with an embedding model (one line of floats per text), or score "
      "documents against --query with a reranker");
  auto args = std::make_shared<EmbedArgs>();
  embed->add_option("-m,--model", args->model, "GGUF encoder (bert, nomic-bert)")->required();
  embed->add_option("texts", args->texts, "Texts to embed (documents, with --query)")->required();
  embed->add_option("--query", args->query, "Rerankers: the query the documents answer");
  embed->add_flag("--no-normalize", args->no_normalize,
                  "Print the pooled vectors as they are, not scaled to unit length");
  embed->add_flag("--json", args->json, "Print JSON");
  embed->add_option("-t,--threads", args->threads, "Threads (default: all cores)");
  embed->callback([&exit_code, args] { exit_code = run_embed(*args); });
}

}  // namespace trellis::cli
