// The chat page of `trellis serve` (web/chat/, embedded in the binary): the files it serves and
// their headers, checked with curl; then the page itself in headless Chromium, driven by
// tests/browser/chat_page_check.mjs (puppeteer-core) against a real server on loopback with the
// tiny synthetic model: a conversation with streamed replies and prefix-cache figures, stop,
// regenerate, switching, reload, the Markdown renderer's safety, a phone-sized window, and the
// API-key flow; and a first message to a server started without flags, as `scripts/run.sh serve`
// starts it, on a model that carries its preset's chat template. Screenshots land in
// <build>/test-output/chat/ ($TRELLIS_TEST_OUTPUT/chat).
//
// The browser checks skip, saying why, when node, Chromium or puppeteer-core is absent
// (scripts/install-deps.sh installs the first two, scripts/setup-browser-test.sh the third);
// TRELLIS_REQUIRE_BROWSER=1 turns that skip into a failure.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_server.h"
#include "model/model_presets.h"
#include "model/preset_chat_templates.h"

namespace trellis {
namespace {

using namespace testing::cli_server;
using testing::CommandResult;
using testing::run_shell;

namespace fs = std::filesystem;
using json = nlohmann::json;

void stop_server(Server& server) {
  ASSERT_TRUE(server.process().send_signal(SIGTERM));
  EXPECT_EQ(server.process().wait_exit(kExitDeadline), 0) << server.log();
}

// The response head and body of one GET (curl -i), bounded like every curl of these tests.
HttpResult get_with_head(const std::string& url) {
  return curl("GET", url, "", "-i");
}

TEST(ChatPageServer, ServesTheEmbeddedFilesWithoutAKey) {
  REQUIRE_CURL();
  std::string error;
  std::unique_ptr<Server> server = start_server({"--api-key", "page-key"}, "page-server", error);
  ASSERT_EQ(error, "");

  const HttpResult index = get_with_head(server->url("/"));
  EXPECT_EQ(index.status, 200) << index.body;
  EXPECT_NE(index.body.find("Content-Type: text/html; charset=utf-8"), std::string::npos);
  EXPECT_NE(index.body.find("Content-Security-Policy: default-src 'self'"), std::string::npos)
      << index.body.substr(0, 800);
  EXPECT_NE(index.body.find("X-Content-Type-Options: nosniff"), std::string::npos);
  EXPECT_NE(index.body.find("<title>Trellis chat</title>"), std::string::npos);
  EXPECT_EQ(get_with_head(server->url("/chat/index.html")).body, index.body);

  const HttpResult script = get_with_head(server->url("/chat/app.js"));
  EXPECT_EQ(script.status, 200);
  EXPECT_NE(script.body.find("Content-Type: text/javascript"), std::string::npos);
  const HttpResult style = get_with_head(server->url("/chat/style.css?v=1"));  // queries ignored
  EXPECT_EQ(style.status, 200);
  EXPECT_NE(style.body.find("Content-Type: text/css"), std::string::npos);

  // Only the embedded files, only by GET; the API still wants its key.
  for (const std::string path : {"/chat/", "/chat/missing.js", "/chat/../index.html",
                                 "/chat//app.js", "/index.html", "/chat/%61pp.js"}) {
    EXPECT_EQ(curl("GET", server->url(path), "", "--path-as-is").status, 404) << path;
  }
  EXPECT_EQ(curl("POST", server->url("/"), "{}").status, 405);
  EXPECT_EQ(curl("GET", server->url("/v1/models")).status, 401);

  EXPECT_NE(
      server->log().find("chat page: http://127.0.0.1:" + std::to_string(server->port()) + "/"),
      std::string::npos)
      << server->log();
  stop_server(*server);
}

// The node_modules folder holding puppeteer-core (the same places as the openai client's).
std::string puppeteer_node_modules() {
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("TRELLIS_NODE_MODULES")) candidates.emplace_back(env);
  const fs::path cli(TRELLIS_CLI_PATH);  // <build>/cli/trellis
  candidates.push_back(cli.parent_path().parent_path() / "node" / "node_modules");
  candidates.push_back(fs::path(TRELLIS_SOURCE_DIR) / "build" / "node" / "node_modules");
  for (const fs::path& dir : candidates)
    if (fs::exists(dir / "puppeteer-core" / "package.json")) return fs::absolute(dir).string();
  return "";
}

// Why the browser checks cannot run here, or empty.
std::string browser_unavailable() {
  if (!have_program("node")) return "node is not installed (scripts/install-deps.sh)";
  if (!have_program("chromium") && !have_program("chromium-browser") && !std::getenv("CHROMIUM"))
    return "chromium is not installed (scripts/install-deps.sh installs it)";
  if (puppeteer_node_modules().empty())
    return "puppeteer-core is absent: run scripts/setup-browser-test.sh <build>/node (or set "
           "TRELLIS_NODE_MODULES to its node_modules folder)";
  return "";
}

bool browser_required() {
  const char* env = std::getenv("TRELLIS_REQUIRE_BROWSER");
  return env != nullptr && std::string(env) == "1";
}

#define REQUIRE_BROWSER()                                                       \
  if (std::string why = browser_unavailable(); !why.empty()) {                  \
    if (browser_required()) FAIL() << "TRELLIS_REQUIRE_BROWSER=1, but " << why; \
    GTEST_SKIP() << why;                                                        \
  }

// Where the screenshots go: $TRELLIS_TEST_OUTPUT/chat, else <build>/test-output/chat.
std::string screenshot_dir() {
  if (const char* env = std::getenv("TRELLIS_TEST_OUTPUT")) return std::string(env) + "/chat";
  const fs::path cli(TRELLIS_CLI_PATH);
  return (cli.parent_path().parent_path() / "test-output" / "chat").string();
}

// Runs the browser script in `mode` against `server` and checks its summary.
void run_browser_check(Server& server, const std::string& mode, const std::string& key) {
  const fs::path script =
      fs::path(TRELLIS_SOURCE_DIR) / "tests" / "browser" / "chat_page_check.mjs";
  ASSERT_TRUE(fs::exists(script)) << script;
  const std::string modules = puppeteer_node_modules();
  const CommandResult run =
      run_shell("TRELLIS_NODE_MODULES=" + shell_quote(modules) + " timeout 180 node " +
                shell_quote(script.string()) + " " + mode + " " + shell_quote(server.url("/")) +
                " " + shell_quote(screenshot_dir()) + " " + shell_quote(key) + " 2>&1");
  const size_t brace = run.output.find("{\n");
  const json summary =
      json::parse(brace == std::string::npos ? "" : run.output.substr(brace), nullptr, false);
  ASSERT_FALSE(summary.is_discarded()) << run.output << "\nserver log:\n" << server.log();
  EXPECT_EQ(run.exit_code, 0) << summary.dump(1) << "\nserver log:\n" << server.log();
  EXPECT_EQ(summary["ok"], true) << summary.dump(1);
  EXPECT_EQ(summary["failed"], 0) << summary.dump(1);
}

TEST(ChatPageBrowser, ConversationStreamsCachesStopsAndPersists) {
  REQUIRE_CURL();
  REQUIRE_BROWSER();
  std::string error;
  // A context long enough for the stop check's reply to stream for a long while.
  std::unique_ptr<Server> server = start_server({"--ctx", "32768"}, "page-chat-server", error);
  ASSERT_EQ(error, "");
  run_browser_check(*server, "chat", "");
  stop_server(*server);
}

TEST(ChatPageBrowser, AsksForTheApiKeyAndTellsAWrongOne) {
  REQUIRE_CURL();
  REQUIRE_BROWSER();
  std::string error;
  std::unique_ptr<Server> server =
      start_server({"--api-key", "page-secret"}, "page-key-server", error);
  ASSERT_EQ(error, "");
  run_browser_check(*server, "key", "page-secret");
  stop_server(*server);
}

// What `scripts/run.sh serve` gives a newcomer: `trellis serve` without flags on a model
// synthesized as the default one is (the tiny preset, for speed: it carries the chat template the
// default tinyllama-1.1b preset carries), and a page that answers a first message.
TEST(ChatPageBrowser, AServerStartedWithoutFlagsAnswersAFirstMessage) {
  ASSERT_EQ(preset_chat_template(*find_model_preset("tiny")),
            preset_chat_template(*find_model_preset("tinyllama-1.1b")));
  REQUIRE_CURL();
  REQUIRE_BROWSER();
  const std::string model = testing::temp_dir() + "/page-first-run.gguf";
  const CommandResult synth =
      run_shell(std::string(TRELLIS_CLI_PATH) + " model synth --preset tiny -o " +
                shell_quote(model) + " 2>&1");
  ASSERT_EQ(synth.exit_code, 0) << synth.output;
  std::unique_ptr<Server> server =
      Server::command({TRELLIS_CLI_PATH, "serve", "--port", "0", "-m", model, "-t", "1"},
                      "page-first-run-server", "listening on http://");
  ASSERT_EQ(server->start(), "");
  EXPECT_EQ(server->log().find("warning:"), std::string::npos) << server->log();
  run_browser_check(*server, "first-run", "");
  stop_server(*server);
}

// A server of several models: the page's menu offers the generation models and sends the one
// chosen.
TEST(ChatPageBrowser, TheModelMenuOfAServerOfSeveralModels) {
  REQUIRE_CURL();
  REQUIRE_BROWSER();
  const std::string dir = testing::temp_dir() + "/page-models";
  fs::create_directories(dir);
  const std::string cli = TRELLIS_CLI_PATH;
  for (const auto& [name, command] :
       {std::pair{"one", " model synth --preset tiny --seed 1 -o "},
        std::pair{"two", " model synth --preset tiny --seed 2 -o "},
        std::pair{"enc", " model synth --arch bert --preset tiny -o "}}) {
    const CommandResult synth =
        run_shell(cli + command + shell_quote(dir + "/" + name + ".gguf") + " 2>&1");
    ASSERT_EQ(synth.exit_code, 0) << synth.output;
  }
  std::unique_ptr<Server> server = Server::command(
      {TRELLIS_CLI_PATH, "serve", "--port", "0", "--models-dir", dir, "-t", "1"},
      "page-models-server", "listening on http://");
  ASSERT_EQ(server->start(), "");
  run_browser_check(*server, "models", "");
  stop_server(*server);
}

}  // namespace
}  // namespace trellis
