// `trellis serve` on an embedding model and on a reranker, driven by the clients applications
// use, unchanged, from npm (tests/node/embedding_clients_check.mjs): the `openai` client's
// embeddings.create (base64 and float), LangChain's OpenAIEmbeddings, and rerank calls in Jina's
// and Cohere's REST shapes. Without node or the packages (scripts/setup-node-client.sh) the test
// skips, saying why; TRELLIS_REQUIRE_NODE_CLIENT=1 makes that a failure.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_runner.h"
#include "cli_server.h"
#include "test_support.h"

namespace trellis {
namespace {

using testing::CommandResult;
using testing::run_shell;
using namespace testing::cli_server;
namespace fs = std::filesystem;

constexpr int kChecks = 7;

std::string synth_encoder(const std::string& name, const std::string& pooling) {
  const std::string path = testing::temp_dir() + "/" + name + ".gguf";
  const CommandResult synth = run_shell(std::string(TRELLIS_CLI_PATH) +
                                        " model synth --arch bert --preset tiny --type q8_0 "
                                        "--pooling " +
                                        pooling + " -o " + path + " 2>&1");
  EXPECT_EQ(synth.exit_code, 0) << synth.output;
  return path;
}

std::unique_ptr<Server> serve(const std::string& model, const std::string& name) {
  std::unique_ptr<Server> server = Server::command(
      {TRELLIS_CLI_PATH, "serve", "--port", "0", "-m", model, "-t", "1", "--model-name", name},
      name, "listening on http://");
  const std::string error = server->start();
  EXPECT_EQ(error, "");
  return server;
}

TEST(EmbeddingClients, OpenAiLangChainJinaAndCohereShapes) {
  REQUIRE_CURL();
  const std::string modules = node_modules_with({"openai", "@langchain/openai"});
  std::string why;
  if (!have_program("node"))
    why = "node is not installed (scripts/install-deps.sh)";
  else if (modules.empty())
    why =
        "the npm packages openai and @langchain/openai are absent: run "
        "scripts/setup-node-client.sh <build>/node";
  if (!why.empty()) {
    const char* required = std::getenv("TRELLIS_REQUIRE_NODE_CLIENT");
    if (required != nullptr && std::string(required) == "1") FAIL() << why;
    GTEST_SKIP() << why;
  }
  std::unique_ptr<Server> embedder = serve(synth_encoder("clients-embed", "mean"), "embed");
  std::unique_ptr<Server> reranker = serve(synth_encoder("clients-rank", "rank"), "rank");
  const fs::path script =
      fs::path(TRELLIS_SOURCE_DIR) / "tests" / "node" / "embedding_clients_check.mjs";
  const CommandResult run =
      run_shell("TRELLIS_NODE_MODULES=" + shell_quote(modules) + " timeout 120 node " +
                shell_quote(script.string()) + " " + shell_quote(embedder->url("/v1")) + " embed " +
                shell_quote(reranker->url("/v1")) + " rank 2>&1");
  EXPECT_EQ(run.exit_code, 0) << run.output << "\nembed log:\n"
                              << embedder->log() << "\nrank log:\n"
                              << reranker->log();
  std::string last = run.output;
  while (!last.empty() && last.back() == '\n') last.pop_back();
  last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
  const nlohmann::json summary = nlohmann::json::parse(last, nullptr, false);
  ASSERT_TRUE(summary.is_object()) << run.output;
  EXPECT_EQ(summary.value("passed", 0), kChecks) << run.output;
  EXPECT_EQ(summary.value("ok", false), true) << run.output;
}

}  // namespace
}  // namespace trellis
