// `trellis route` end to end: the real binary as a child process on loopback, over replicas it
// spawns itself (--spawn) or is given (--replica), driven by curl and the official `openai` npm
// client. Every wait is bounded; every child dies with the test (PR_SET_PDEATHSIG), and the
// router's replicas die with the router.
#include <gtest/gtest.h>

#include <csignal>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "cli_server.h"

namespace trellis {
namespace {

using testing::CommandResult;
using testing::run_cli;
using namespace testing::cli_server;
using json = nlohmann::json;


constexpr const char* kRouterMarker = "router listening on http://";

// The replicas' URLs from the router's "spawned replica URL" lines.
std::vector<std::string> spawned_urls(const std::string& log) {
  std::vector<std::string> urls;
  const std::string marker = "spawned replica ";
  for (size_t at = log.find(marker); at != std::string::npos; at = log.find(marker, at + 1)) {
    const size_t begin = at + marker.size();
    urls.push_back(log.substr(begin, log.find('\n', begin) - begin));
  }
  return urls;
}

// A router metric sample (without the prefix); -1 when absent.
double router_metric(Server& router, const std::string& sample) {
  const std::string text = curl("GET", router.url("/metrics")).body;
  const std::string key = "\ntrellis_router:" + sample + " ";
  const size_t at = text.find(key);
  return at == std::string::npos ? -1 : std::stod(text.substr(at + key.size()));
}

json chat(const std::string& user) {
  return json{{"model", "tiny"},
              {"messages",
               {{{"role", "system"}, {"content", "You answer in one word, always the same one."}},
                {{"role", "user"}, {"content", user}}}},
              {"max_tokens", 3},
              {"temperature", 0}};
}

TEST(RouteCli, SpawnedReplicasServeTheOpenAiClientAndStopWithTheRouter) {
  REQUIRE_CURL();
  if (std::string why = openai_client_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const std::string model = synth_tiny_model();
  ASSERT_FALSE(model.empty());
  std::unique_ptr<Server> router = Server::command(
      {TRELLIS_CLI_PATH, "route", "--port", "0", "--api-key", "router-key", "--spawn", "2", "-m",
       model, "-t", "1", "--chat-template", "chatml", "--model-name", "tiny", "--quiet"},
      "route-spawn", kRouterMarker);
  ASSERT_EQ(router->start(), "");
  const std::vector<std::string> replicas = spawned_urls(router->log());
  ASSERT_EQ(replicas.size(), 2u) << router->log();
  for (const std::string& url : replicas) EXPECT_EQ(curl("GET", url + "/health").status, 200);

  const CommandResult run =
      run_openai_client_check(openai_node_modules(), router->url("/v1"), "router-key");
  EXPECT_EQ(run.exit_code, 0) << run.output << "\nrouter log:\n" << router->log();
  expect_openai_client_passed(run);
  EXPECT_GT(router_metric(*router, "retries_total"), -1);
  EXPECT_EQ(router_metric(*router, "no_replica_total"), 0);

  ASSERT_TRUE(router->process().send_signal(SIGTERM));
  EXPECT_EQ(router->process().wait_exit(kExitDeadline), 0) << router->log();
  for (const std::string& url : replicas) EXPECT_EQ(curl("GET", url + "/health").status, 0) << url;
}

TEST(RouteCli, RoutesOverGivenReplicasByPrefix) {
  REQUIRE_CURL();
  const std::string model = synth_tiny_model();
  ASSERT_FALSE(model.empty());
  Server a(model, {"--quiet"}, "route-replica-a"), b(model, {"--quiet"}, "route-replica-b");
  ASSERT_EQ(a.start(), "");
  ASSERT_EQ(b.start(), "");
  std::unique_ptr<Server> router = Server::command(
      {TRELLIS_CLI_PATH, "route", "--port", "0", "--replica", a.url(""), "--replica", b.url(""),
       "--health-interval", "0.2"},
      "route-given", kRouterMarker);
  ASSERT_EQ(router->start(), "");
  for (int i = 0; i < 4; ++i) {
    HttpResult r = curl("POST", router->url("/v1/chat/completions"), chat("q" + std::to_string(i)).dump());
    EXPECT_EQ(r.status, 200) << r.body;
  }
  EXPECT_EQ(router_metric(*router, "decisions_total{reason=\"cache_match\"}"), 3);
  // A replica that stops is taken out; the other serves everything.
  ASSERT_TRUE(b.process().send_signal(SIGKILL));
  for (int i = 0; i < 4; ++i) {
    HttpResult r = curl("POST", router->url("/v1/completions"),
                        json{{"prompt", "p" + std::to_string(i)}, {"max_tokens", 2}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
  }
  EXPECT_EQ(curl("GET", router->url("/health")).status, 200);
  ASSERT_TRUE(router->process().send_signal(SIGTERM));
  EXPECT_EQ(router->process().wait_exit(kExitDeadline), 0) << router->log();
  EXPECT_NE(router->log().find("is down"), std::string::npos) << router->log();
}

TEST(RouteCli, BadOptionsAreClearErrors) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"route", "--port", "0"}, "no replica"},
      {{"route", "--replica", "ftp://x:1"}, "must start with http://"},
      {{"route", "--replica", "http://x:99999"}, "bad port"},
      {{"route", "--replica", "http://x:1", "--policy", "fastest"}, "--policy must be"},
      {{"route", "--replica", "http://x:1", "-m", "model.gguf"}, "serve flags go with --spawn"},
      {{"route", "--replica", "http://x:1", "--match-threshold", "2"}, "--match-threshold"},
  };
  for (const Case& c : cases) {
    std::string command;
    for (const std::string& arg : c.args) command += " " + shell_quote(arg);
    const CommandResult run = testing::run_shell(std::string(TRELLIS_CLI_PATH) + command + " 2>&1");
    EXPECT_EQ(run.exit_code, 1) << command << "\n" << run.output;
    EXPECT_NE(run.output.find(c.message), std::string::npos) << command << "\n" << run.output;
  }
}

}  // namespace
}  // namespace trellis
