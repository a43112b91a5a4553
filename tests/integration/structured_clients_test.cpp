// Structured outputs and tool calls of `trellis serve`, driven by the clients applications use,
// unchanged, from npm: the official `openai` client (zodResponseFormat with .parse, tools, streamed
// tool calls, runTools), the Vercel AI SDK (`ai` v4 with `@ai-sdk/openai-compatible`:
// generateObject, generateText with tools and maxSteps) and LangChain (`@langchain/openai`:
// withStructuredOutput, bindTools). tests/node/structured_clients_check.mjs runs them; every
// constrained output is validated there by Ajv against the schema the client sent, besides the
// client's own zod parsing. The tiny random-weight model writes nonsense, but the grammar makes it
// well-formed nonsense: that is what the clients must accept.
//
// The server runs once in ChatML (tool calls in HERMES's <tool_call> blocks) and once with the
// model's own template (Zephyr: the GENERIC {"tool_calls": [...]} syntax). Without node or the npm
// packages (scripts/setup-node-client.sh installs them into build/node) the tests skip, saying
// so; TRELLIS_REQUIRE_NODE_CLIENT=1 turns that skip into a failure.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "cli_server.h"
#include "test_support.h"

namespace trellis {
namespace {

using testing::CommandResult;
using testing::run_shell;
using namespace testing::cli_server;
namespace fs = std::filesystem;
using json = nlohmann::json;

// The checks the script runs (one may skip: runTools, where the openai version lacks it).
constexpr int kChecks = 14;
// The prompt with two tools takes ~600 tokens of the tiny vocabulary, and an agent's later steps
// add the earlier calls and results; replies are capped at 300 tokens.
constexpr const char* kContext = "2048";
constexpr const char* kApiKey = "structured-key";

fs::path source_root() {
  return fs::path(TRELLIS_SOURCE_DIR);
}

// The node_modules folder holding every package the script loads (see node_modules_with).
std::string client_node_modules() {
  return node_modules_with({"openai", "zod", "ajv", "ajv-formats", "ai",
                            "@ai-sdk/openai-compatible", "@langchain/openai", "@langchain/core"});
}

// Why the clients cannot run here, or empty.
std::string clients_unavailable() {
  if (!have_program("node"))
    return "node is not installed (scripts/install-deps.sh installs nodejs and npm)";
  if (client_node_modules().empty())
    return "the npm packages openai, zod, ajv, ajv-formats, ai, @ai-sdk/openai-compatible, "
           "@langchain/openai and @langchain/core are not all in one node_modules folder: run "
           "scripts/setup-node-client.sh <build>/node (or set TRELLIS_NODE_MODULES to that "
           "folder)";
  return "";
}

bool node_client_required() {
  const char* env = std::getenv("TRELLIS_REQUIRE_NODE_CLIENT");
  return env != nullptr && std::string(env) == "1";
}

#define REQUIRE_CLIENTS()                                                               \
  if (std::string why = clients_unavailable(); !why.empty()) {                          \
    if (node_client_required()) FAIL() << "TRELLIS_REQUIRE_NODE_CLIENT=1, but " << why; \
    GTEST_SKIP() << why;                                                                \
  }

// `trellis serve` on the tiny model with the model's own chat template (Server always passes
// --chat-template chatml).
std::unique_ptr<Server> start_with_model_template(const std::string& name, std::string& error) {
  const std::string model = synth_tiny_model();
  if (model.empty()) {
    error = "model synth failed";
    return nullptr;
  }
  std::unique_ptr<Server> server =
      Server::command({TRELLIS_CLI_PATH, "serve", "--port", "0", "-m", model, "-t", "1",
                       "--model-name", "tiny", "--ctx", kContext, "--api-key", kApiKey},
                      name, "listening on http://");
  error = server->start();
  return server;
}

// Runs the script against `server` and checks its summary: every check passed.
void expect_clients_pass(Server& server) {
  const fs::path script = source_root() / "tests" / "node" / "structured_clients_check.mjs";
  ASSERT_TRUE(fs::exists(script)) << script;
  const std::string modules = client_node_modules();
  const CommandResult run = run_shell(
      "TRELLIS_NODE_MODULES=" + shell_quote(modules) + " NODE_PATH=" + shell_quote(modules) +
      " timeout 300 node " + shell_quote(script.string()) + " " + shell_quote(server.url("/v1")) +
      " tiny " + shell_quote(kApiKey) + " 2>&1");
  EXPECT_EQ(run.exit_code, 0) << run.output << "\nserver log:\n" << server.log();
  // The summary is the last line.
  std::string last = run.output;
  while (!last.empty() && last.back() == '\n') last.pop_back();
  last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
  const json summary = json::parse(last, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(summary.is_object()) << run.output;
  EXPECT_EQ(summary.value("ok", false), true) << run.output;
  ASSERT_TRUE(summary["failed"].is_array() && summary["skipped"].is_array()) << run.output;
  EXPECT_TRUE(summary["failed"].empty()) << run.output;
  EXPECT_EQ(summary.value("passed", 0) + static_cast<int>(summary["skipped"].size()), kChecks)
      << run.output;
  for (const json& skipped : summary["skipped"])
    EXPECT_NE(skipped.get<std::string>().find("runTools"), std::string::npos) << run.output;
}

TEST(StructuredClients, OpenAiVercelAndLangChainUnderChatMlHermesCalls) {
  REQUIRE_CURL();
  REQUIRE_CLIENTS();
  std::string error;
  std::unique_ptr<Server> server =
      start_server({"--ctx", kContext, "--api-key", kApiKey}, "structured-clients-chatml", error);
  ASSERT_EQ(error, "");
  expect_clients_pass(*server);

  ASSERT_TRUE(server->process().send_signal(SIGTERM));
  EXPECT_EQ(server->process().wait_exit(kExitDeadline), 0) << server->log();
}

TEST(StructuredClients, OpenAiVercelAndLangChainUnderTheModelsTemplateGenericCalls) {
  if (testing::under_sanitizer())
    GTEST_SKIP() << "the ChatML run covers the server under the sanitizer; this one runs in the "
                    "release build";
  REQUIRE_CURL();
  REQUIRE_CLIENTS();
  std::string error;
  std::unique_ptr<Server> server = start_with_model_template("structured-clients-default", error);
  ASSERT_NE(server, nullptr) << error;
  ASSERT_EQ(error, "");
  expect_clients_pass(*server);

  ASSERT_TRUE(server->process().send_signal(SIGTERM));
  EXPECT_EQ(server->process().wait_exit(kExitDeadline), 0) << server->log();
}

}  // namespace
}  // namespace trellis
