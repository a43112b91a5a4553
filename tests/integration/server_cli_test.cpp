// `trellis serve` end to end: the real binary as a child process on loopback, driven by real
// clients (curl, and the official `openai` npm client through tests/node/openai_client_check.mjs).
//
// Every wait is bounded: server start-up, /health, each curl call (--max-time) and the exit after
// a signal each have a deadline, so a hung server fails a test instead of hanging it. Every child
// is killed in teardown (and dies with this process through PR_SET_PDEATHSIG), so none outlives
// the test binary.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_runner.h"
#include "cli_server.h"
#include "test_support.h"

namespace trellis {
namespace {

using testing::CommandResult;
using testing::run_cli;
using testing::run_shell;
using namespace testing::cli_server;

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// One server shared by the tests that do not stop it.
class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!have_program("curl")) return;
    model_ = synth_tiny_model();
    if (model_.empty()) return;
    server_ = new Server(model_, {"--ctx", "1024"}, "shared-server");
    start_error_ = server_->start();
  }
  static void TearDownTestSuite() {
    delete server_;  // kills the child
    server_ = nullptr;
  }
  void SetUp() override {
    REQUIRE_CURL();
    ASSERT_FALSE(model_.empty()) << "model synth failed";
    ASSERT_EQ(start_error_, "");
  }

  static HttpResult post(const std::string& path, const json& body) {
    return curl("POST", server_->url(path), body.dump());
  }
  static HttpResult get(const std::string& path) { return curl("GET", server_->url(path)); }

  static std::string model_;
  static Server* server_;
  static std::string start_error_;
};
std::string ServerTest::model_;
Server* ServerTest::server_ = nullptr;
std::string ServerTest::start_error_;

// Concatenated choices[index].text (completions) or delta.content (chat) of an SSE stream;
// checks the framing on the way.
std::string stream_text(const HttpResult& r, bool chat, json* usage = nullptr, int index = 0) {
  EXPECT_EQ(r.status, 200) << r.body;
  SseEvents events = parse_sse(r.body);
  EXPECT_TRUE(events.well_formed) << "every non-empty line starts with `data: `:\n" << r.body;
  EXPECT_GE(events.data.size(), 2u) << r.body;
  if (events.data.empty()) return "";
  EXPECT_EQ(events.data.back(), "[DONE]") << r.body;
  std::string text;
  for (size_t i = 0; i + 1 < events.data.size(); ++i) {
    json chunk = json::parse(events.data[i], nullptr, false);
    EXPECT_FALSE(chunk.is_discarded()) << events.data[i];
    if (chunk.is_discarded()) continue;
    EXPECT_EQ(chunk["object"], chat ? "chat.completion.chunk" : "text_completion");
    if (usage != nullptr && chunk.contains("usage") && !chunk["usage"].is_null())
      *usage = chunk["usage"];
    for (const json& choice : chunk["choices"]) {
      if (choice.value("index", -1) != index) continue;
      if (chat) {
        if (choice.contains("delta") && choice["delta"].contains("content") &&
            choice["delta"]["content"].is_string())
          text += choice["delta"]["content"].get<std::string>();
      } else {
        text += choice.value("text", "");
      }
    }
  }
  return text;
}

json completion_request(int max_tokens) {
  return {{"model", "tiny"},
          {"prompt", "Once upon a time"},
          {"max_tokens", max_tokens},
          {"temperature", 0.0},
          {"ignore_eos", true}};
}

TEST_F(ServerTest, CompletionStreamEqualsNonStreamAtTemperatureZero) {
  HttpResult whole = post("/v1/completions", completion_request(16));
  ASSERT_EQ(whole.status, 200) << whole.body;
  json j = whole.json_body();
  ASSERT_FALSE(j.is_discarded()) << whole.body;
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "tiny");
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 16);
  // As many as `trellis tokenize` gives for the prompt (BOS included, as the server adds it).
  const CommandResult ids =
      run_cli("tokenize -m " + shell_quote(model_) + " 'Once upon a time'", false);
  ASSERT_EQ(ids.exit_code, 0) << ids.output;
  std::istringstream id_words(ids.output);
  const auto n_prompt_tokens = std::distance(std::istream_iterator<std::string>(id_words),
                                             std::istream_iterator<std::string>());
  EXPECT_GE(n_prompt_tokens, 2) << ids.output;
  EXPECT_EQ(j["usage"]["prompt_tokens"].get<int>(), n_prompt_tokens) << ids.output;
  EXPECT_EQ(j["usage"]["total_tokens"].get<int>(),
            j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>());
  const std::string text = j["choices"][0]["text"];
  EXPECT_FALSE(text.empty());

  json request = completion_request(16);
  request["stream"] = true;
  request["stream_options"] = {{"include_usage", true}};
  json usage;
  EXPECT_EQ(stream_text(post("/v1/completions", request), false, &usage), text);
  EXPECT_EQ(usage["completion_tokens"], 16) << usage.dump();
  EXPECT_EQ(usage["prompt_tokens"], j["usage"]["prompt_tokens"]) << usage.dump();
}

TEST_F(ServerTest, ChatCompletionAndItsStream) {
  json request = {{"model", "tiny"},
                  {"messages", {{{"role", "user"}, {"content", "Tell me a story."}}}},
                  {"max_tokens", 10},
                  {"temperature", 0.0},
                  {"ignore_eos", true}};
  HttpResult whole = post("/v1/chat/completions", request);
  ASSERT_EQ(whole.status, 200) << whole.body;
  json j = whole.json_body();
  ASSERT_FALSE(j.is_discarded()) << whole.body;
  EXPECT_EQ(j["object"], "chat.completion");
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  ASSERT_TRUE(j["choices"][0]["message"]["content"].is_string()) << whole.body;
  EXPECT_EQ(j["usage"]["completion_tokens"], 10);
  EXPECT_TRUE(j["usage"]["prompt_tokens_details"]["cached_tokens"].is_number()) << whole.body;

  request["stream"] = true;
  EXPECT_EQ(stream_text(post("/v1/chat/completions", request), true),
            j["choices"][0]["message"]["content"].get<std::string>());
}

TEST_F(ServerTest, TwoChoicesAtTemperatureZeroAreBothTheGreedyText) {
  HttpResult one = post("/v1/completions", completion_request(8));
  ASSERT_EQ(one.status, 200) << one.body;
  const std::string greedy = one.json_body()["choices"][0]["text"];

  json request = completion_request(8);
  request["n"] = 2;
  HttpResult two = post("/v1/completions", request);
  ASSERT_EQ(two.status, 200) << two.body;
  json j = two.json_body();
  ASSERT_EQ(j["choices"].size(), 2u) << two.body;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(j["choices"][i]["index"], i);
    EXPECT_EQ(j["choices"][i]["text"], greedy) << "choice " << i;
  }
  EXPECT_EQ(j["usage"]["completion_tokens"], 16) << "both choices count";

  request["stream"] = true;
  HttpResult streamed = post("/v1/completions", request);
  EXPECT_EQ(stream_text(streamed, false, nullptr, 0), greedy);
  EXPECT_EQ(stream_text(streamed, false, nullptr, 1), greedy);
}

TEST_F(ServerTest, StopStringEndsTheTextBeforeIt) {
  HttpResult free_run = post("/v1/completions", completion_request(24));
  ASSERT_EQ(free_run.status, 200) << free_run.body;
  const std::string text = free_run.json_body()["choices"][0]["text"];
  // A stop string of two ASCII bytes from the second half of the text; the text must end just
  // before its first occurrence.
  std::string stop;
  for (size_t i = text.size() / 2; i + 2 <= text.size() && stop.empty(); ++i) {
    const auto c0 = static_cast<unsigned char>(text[i]);
    const auto c1 = static_cast<unsigned char>(text[i + 1]);
    if (c0 > 32 && c0 < 127 && c1 > 32 && c1 < 127) stop = text.substr(i, 2);
  }
  ASSERT_FALSE(stop.empty()) << "no printable ASCII pair in " << json(text).dump();
  const std::string expected = text.substr(0, text.find(stop));

  json request = completion_request(24);
  request["stop"] = {stop, "never-generated-stop"};
  HttpResult stopped = post("/v1/completions", request);
  ASSERT_EQ(stopped.status, 200) << stopped.body;
  json j = stopped.json_body();
  EXPECT_EQ(j["choices"][0]["text"], expected) << "stop " << json(stop).dump();
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_LT(j["usage"]["completion_tokens"].get<int>(), 24);

  request["stream"] = true;
  EXPECT_EQ(stream_text(post("/v1/completions", request), false), expected)
      << "stop " << json(stop).dump();
}

TEST_F(ServerTest, TokenizeDetokenizeRoundTrip) {
  HttpResult tokenized = post("/tokenize", {{"prompt", "Hello world"}});
  ASSERT_EQ(tokenized.status, 200) << tokenized.body;
  json t = tokenized.json_body();
  ASSERT_TRUE(t["tokens"].is_array()) << tokenized.body;
  EXPECT_FALSE(t["tokens"].empty());
  EXPECT_EQ(t["count"], t["tokens"].size());
  EXPECT_EQ(t["max_model_len"], 1024);

  HttpResult detokenized = post("/detokenize", {{"tokens", t["tokens"]}});
  ASSERT_EQ(detokenized.status, 200) << detokenized.body;
  const std::string prompt = detokenized.json_body()["prompt"];
  EXPECT_NE(prompt.find("Hello world"), std::string::npos) << prompt;

  HttpResult bad = post("/detokenize", {{"tokens", {5, 99999999}}});
  EXPECT_EQ(bad.status, 400) << bad.body;
}

TEST_F(ServerTest, ModelsHealthAndMetrics) {
  HttpResult models = get("/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  json m = models.json_body();
  EXPECT_EQ(m["object"], "list");
  ASSERT_EQ(m["data"].size(), 1u) << models.body;
  EXPECT_EQ(m["data"][0]["id"], "tiny");

  HttpResult health = get("/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.json_body()["status"], "ok") << health.body;

  ASSERT_EQ(post("/v1/completions", completion_request(4)).status, 200);
  HttpResult metrics = get("/metrics");
  ASSERT_EQ(metrics.status, 200);
  for (const char* name :
       {"trellis:prompt_tokens_total", "trellis:generation_tokens_total",
        "trellis:num_requests_running", "trellis:kv_cache_usage_perc",
        "trellis:time_to_first_token_seconds_bucket", "trellis:requests_finished_total",
        "# TYPE trellis:prompt_tokens_total counter"})
    EXPECT_NE(metrics.body.find(name), std::string::npos) << name << " in\n" << metrics.body;
  // The counters saw at least the request above.
  std::istringstream lines(metrics.body);
  std::string line;
  double generated = -1;
  while (std::getline(lines, line))
    if (line.rfind("trellis:generation_tokens_total ", 0) == 0)
      generated = std::atof(line.c_str() + line.find(' ') + 1);
  EXPECT_GE(generated, 4) << metrics.body;
}

void expect_error_shape(const HttpResult& r, int status) {
  EXPECT_EQ(r.status, status) << r.body;
  json j = r.json_body();
  ASSERT_FALSE(j.is_discarded()) << r.body;
  ASSERT_TRUE(j.contains("error")) << r.body;
  const json& e = j["error"];
  EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << r.body;
  EXPECT_TRUE(e["type"].is_string()) << r.body;
  EXPECT_TRUE(e.contains("param")) << r.body;
  EXPECT_TRUE(e.contains("code")) << r.body;
}

TEST_F(ServerTest, BadRequestsGetOpenAiShapedErrors) {
  HttpResult malformed = curl("POST", server_->url("/v1/completions"), "{\"prompt\": \"x\",");
  expect_error_shape(malformed, 400);
  EXPECT_EQ(malformed.json_body()["error"]["type"], "invalid_request_error") << malformed.body;

  HttpResult chat_malformed = curl("POST", server_->url("/v1/chat/completions"), "not json");
  expect_error_shape(chat_malformed, 400);

  HttpResult no_messages = post("/v1/chat/completions", {{"model", "tiny"}});
  expect_error_shape(no_messages, 400);

  json unknown = completion_request(2);
  unknown["model"] = "no-such-model";
  HttpResult not_found = post("/v1/completions", unknown);
  expect_error_shape(not_found, 404);
  EXPECT_EQ(not_found.json_body()["error"]["code"], "model_not_found") << not_found.body;

  expect_error_shape(get("/v1/no-such-route"), 404);

  // The server still serves after all of that.
  EXPECT_EQ(post("/v1/completions", completion_request(2)).status, 200);
}

TEST(ServerAuth, ApiKeyIsRequiredExceptForHealth) {
  REQUIRE_CURL();
  std::string error;
  std::unique_ptr<Server> server = start_server({"--api-key", "secret"}, "auth-server", error);
  ASSERT_EQ(error, "");

  const std::string models = server->url("/v1/models");
  HttpResult no_header = curl("GET", models);
  expect_error_shape(no_header, 401);
  EXPECT_EQ(no_header.json_body()["error"]["type"], "authentication_error") << no_header.body;
  expect_error_shape(curl("GET", models, "", "-H 'Authorization: Bearer wrong'"), 401);
  expect_error_shape(curl("GET", models, "", "-H 'Authorization: Bearer secretX'"), 401);
  EXPECT_EQ(curl("GET", models, "", "-H 'Authorization: Bearer secret'").status, 200);

  const std::string body = completion_request(2).dump();
  expect_error_shape(curl("POST", server->url("/v1/completions"), body), 401);
  EXPECT_EQ(curl("POST", server->url("/v1/completions"), body, "-H 'Authorization: Bearer secret'")
                .status,
            200);
  EXPECT_EQ(curl("GET", server->url("/health")).status, 200) << "/health needs no key";

  ASSERT_TRUE(server->process().send_signal(SIGTERM));
  EXPECT_EQ(server->process().wait_exit(kExitDeadline), 0) << server->log();
}

TEST(ServerStartup, ErrorsBeforeServingExitNonZeroWithOneLine) {
  const std::string model = synth_tiny_model();
  ASSERT_FALSE(model.empty());
  const std::string not_gguf = testing::temp_dir() + "/not-a-model.gguf";
  std::ofstream(not_gguf) << "this is not a GGUF file\n";
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"-m", model, "--kv-mem", "lots"}, "--kv-mem"},
      {{"-m", model, "--kv-mem", "0"}, "--kv-mem must be positive"},
      {{"-m", not_gguf}, "not-a-model.gguf"},
      {{"-m", model, "--api-key", ""}, "--api-key must not be empty"},
      {{"-m", model, "--cache-isolation", "key"}, "needs API keys"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {TRELLIS_CLI_PATH, "serve", "--port", "0"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    ChildProcess server(argv, testing::temp_dir() + "/startup-error.log");
    // Before the fix the process printed the error and went on listening, deaf to SIGTERM.
    const std::optional<int> code = server.wait_exit(kExitDeadline);
    const std::string log = server.log();
    EXPECT_EQ(code, 1) << c.says << "\n" << log;
    EXPECT_NE(log.find(c.says), std::string::npos) << log;
    EXPECT_EQ(
        std::count(log.begin(), log.end(), '\n') - (log.find("listening on") != std::string::npos),
        1)
        << "one line of error:\n"
        << log;
  }
}

TEST(ServerStartup, KeyFileLinesAreTrimmed) {
  REQUIRE_CURL();
  const std::string keys = testing::temp_dir() + "/keys.txt";
  std::ofstream(keys) << "# clients\n  \tsecret \t\r\n\n";
  std::string error;
  std::unique_ptr<Server> server = start_server({"--api-key-file", keys}, "keyfile-server", error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(curl("GET", server->url("/v1/models"), "", "-H 'Authorization: Bearer secret'").status,
            200);
  EXPECT_EQ(curl("GET", server->url("/v1/models")).status, 401);
  ASSERT_TRUE(server->process().send_signal(SIGTERM));
  EXPECT_EQ(server->process().wait_exit(kExitDeadline), 0) << server->log();
}

TEST(ServerShutdown, SigtermExitsZeroAfterLoggingRequests) {
  REQUIRE_CURL();
  std::string error;
  std::unique_ptr<Server> server = start_server({}, "shutdown-server", error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(curl("POST", server->url("/v1/completions"), completion_request(3).dump()).status, 200);

  ASSERT_TRUE(server->process().send_signal(SIGTERM));
  EXPECT_EQ(server->process().wait_exit(kExitDeadline), 0) << server->log();
  const std::string log = server->log();
  EXPECT_NE(log.find("ready: model tiny"), std::string::npos) << log;
  EXPECT_NE(log.find("request "), std::string::npos) << log;
  EXPECT_NE(log.find("status=200"), std::string::npos) << log;
  EXPECT_NE(log.find("shutting down"), std::string::npos) << log;
}

// A model without a chat template chats in ChatML; the server says so once, at start-up.
TEST(ServerChatTemplate, AModelWithoutATemplateFallsBackToChatMlWithOneWarning) {
  REQUIRE_CURL();
  const std::string model = testing::temp_dir() + "/server-no-template.gguf";
  const CommandResult synth =
      run_cli("model synth --preset tiny --type q8_0 --no-chat-template -o " + shell_quote(model));
  ASSERT_EQ(synth.exit_code, 0) << synth.output;
  std::unique_ptr<Server> server =
      Server::command({TRELLIS_CLI_PATH, "serve", "--port", "0", "-m", model, "-t", "1"},
                      "no-template-server", "listening on http://");
  ASSERT_EQ(server->start(), "");
  const json request = {{"messages", {{{"role", "user"}, {"content", "Hello"}}}},
                        {"max_tokens", 3}};
  const HttpResult reply = curl("POST", server->url("/v1/chat/completions"), request.dump());
  EXPECT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(curl("POST", server->url("/v1/chat/completions"), request.dump()).status, 200);
  ASSERT_TRUE(server->process().send_signal(SIGTERM));
  EXPECT_EQ(server->process().wait_exit(kExitDeadline), 0) << server->log();
  const std::string log = server->log();
  const std::string warning = "warning: chat requests use ChatML: " + model +
                              ": no tokenizer.chat_template key; pass --chat-template NAME";
  const size_t at = log.find(warning);
  EXPECT_NE(at, std::string::npos) << log;
  EXPECT_EQ(log.find("warning:", at + 1), std::string::npos) << "one warning only:\n" << log;
  EXPECT_LT(at, log.find("ready: model")) << "the warning comes at start-up:\n" << log;
}

// `stop_signal` during a long stream: the stream ends with its error event, the server exits 0.
void expect_graceful_stop_during_a_long_stream(int stop_signal) {
  // The stream asks for the whole context (4091 tokens after a 5-token prompt): 2.4 s of
  // generation on one thread of the 2-core test machine (each step attends to everything before
  // it), against the milliseconds between its first event and the signal. So the signal finds it
  // running without the test having to check, and the assertions below fail if shutdown let it
  // run to the end (finish_reason "length") instead of cancelling it.
  constexpr int kContext = 4096;
  const std::vector<int> prompt = {1, 300, 301, 302, 303};
  std::string error;
  std::unique_ptr<Server> server =
      start_server({"--ctx", std::to_string(kContext)}, "stream-server", error);
  ASSERT_EQ(error, "");

  json request = completion_request(kContext - static_cast<int>(prompt.size()));
  request["prompt"] = prompt;
  request["stream"] = true;
  const std::string body_path = testing::temp_dir() + "/long-stream.json";
  std::ofstream(body_path) << request.dump();
  const std::string stream_path = testing::temp_dir() + "/long-stream.out";
  ChildProcess client({"curl", "-sS", "-N", "--max-time", std::to_string(kCurlMaxSeconds), "-H",
                       "Content-Type: application/json", "--data-binary", "@" + body_path,
                       server->url("/v1/completions")},
                      stream_path);

  // Signal once the stream has begun (an event; the deadline only bounds a broken server).
  const auto until = Clock::now() + kStartDeadline;
  while (read_file(stream_path).find("data: ") == std::string::npos && client.running() &&
         Clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_NE(read_file(stream_path).find("data: "), std::string::npos)
      << "the stream did not begin:\n"
      << read_file(stream_path) << "\nserver log:\n"
      << server->log();

  ASSERT_TRUE(server->process().send_signal(stop_signal));
  EXPECT_EQ(server->process().wait_exit(kExitDeadline), 0) << server->log();
  const std::string log = server->log();
  EXPECT_NE(log.find("shutting down"), std::string::npos) << log;
  // The client's connection ends with the server (well before curl's own --max-time).
  EXPECT_TRUE(client.wait_exit(kExitDeadline).has_value()) << "curl still waits on the stream";
  // The shutdown cancelled the stream: the client was told so, and the request's log line says
  // it ended cancelled rather than finished.
  const std::string stream = read_file(stream_path);
  EXPECT_NE(stream.find("server shutting down"), std::string::npos) << stream.substr(0, 2000);
  EXPECT_EQ(stream.find("\"finish_reason\":\"length\""), std::string::npos);
  EXPECT_NE(log.find("finish=cancelled"), std::string::npos) << log;
  EXPECT_EQ(log.find("finish=length"), std::string::npos) << log;
}

TEST(ServerShutdown, SigtermDuringALongStreamStillExitsZero) {
  REQUIRE_CURL();
  expect_graceful_stop_during_a_long_stream(SIGTERM);
}

// Closing the terminal or SSH session that runs the server (SIGHUP) stops it as gracefully as
// SIGTERM does; before, the process died at once and its streams broke without an error event.
TEST(ServerShutdown, SighupStopsAsGracefullyAsSigterm) {
  REQUIRE_CURL();
  expect_graceful_stop_during_a_long_stream(SIGHUP);
}

TEST(ServerOpenAiNodeClient, OfficialClientWorksAgainstTheServer) {
  REQUIRE_CURL();
  if (std::string why = openai_client_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const std::string modules = openai_node_modules();
  std::string error;
  std::unique_ptr<Server> server = start_server({"--api-key", "node-key"}, "node-server", error);
  ASSERT_EQ(error, "");
  const CommandResult run = run_openai_client_check(modules, server->url("/v1"), "node-key");
  EXPECT_EQ(run.exit_code, 0) << run.output << "\nserver log:\n" << server->log();
  expect_openai_client_passed(run);

  ASSERT_TRUE(server->process().send_signal(SIGTERM));
  EXPECT_EQ(server->process().wait_exit(kExitDeadline), 0) << server->log();
}

}  // namespace
}  // namespace trellis

namespace trellis {
namespace {

// --cache-dir: what one server cached is found on disk by the next one, per API key only, usage
// says how many cached tokens came from disk, /metrics has the tier's figures, and a second
// server on the same directory is refused.
TEST(ServerDiskTier, TheNextServerFindsThePrefixOnDiskPerKeyOnly) {
  REQUIRE_CURL();
  const std::string dir = testing::temp_dir() + "/server-disk-tier";
  fs::remove_all(dir);
  const std::vector<std::string> args = {
      "-B",        "8",  "--cache-dir",       dir,  "--api-key", "k1",
      "--api-key", "k2", "--cache-isolation", "key"};
  json request = completion_request(6);
  request["prompt"] =
      "The quick brown fox jumps over the lazy dog and keeps running through the forest until "
      "night falls on the quiet hills.";
  auto complete = [&](Server& server, const std::string& key) {
    HttpResult r = curl("POST", server.url("/v1/completions"), request.dump(),
                        "-H 'Authorization: Bearer " + key + "'");
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json_body();
  };
  std::string first_text;
  {
    std::string error;
    std::unique_ptr<Server> server = start_server(args, "disk-tier-1", error);
    ASSERT_EQ(error, "");
    const json first = complete(*server, "k1");
    first_text = first["choices"][0]["text"];
    EXPECT_EQ(first["usage"]["prompt_tokens_details"]["disk_cached_tokens"], 0) << first;
    // SIGHUP (the terminal closed) writes the tier like SIGTERM; before, it wrote nothing.
    ASSERT_TRUE(server->process().send_signal(SIGHUP));
    EXPECT_EQ(server->process().wait_exit(kExitDeadline), 0) << server->log();
  }
  std::string error;
  std::unique_ptr<Server> server = start_server(args, "disk-tier-2", error);
  ASSERT_EQ(error, "");
  const json other = complete(*server, "k2");
  EXPECT_EQ(other["usage"]["prompt_tokens_details"]["cached_tokens"], 0) << other;
  EXPECT_EQ(other["usage"]["prompt_tokens_details"]["disk_cached_tokens"], 0) << other;
  const json again = complete(*server, "k1");
  EXPECT_EQ(again["choices"][0]["text"], first_text);
  const json& details = again["usage"]["prompt_tokens_details"];
  EXPECT_GE(details["disk_cached_tokens"].get<int>(), 48) << again;
  EXPECT_EQ(details["disk_cached_tokens"], details["cached_tokens"]) << again;
  const HttpResult metrics = curl("GET", server->url("/metrics"));
  EXPECT_NE(metrics.body.find("trellis:disk_cache_hits_total"), std::string::npos);
  EXPECT_NE(metrics.body.find("trellis:disk_cache_blocks_read_total"), std::string::npos);

  ChildProcess second({TRELLIS_CLI_PATH, "serve", "--port", "0", "-m", synth_tiny_model(), "-B",
                       "8", "--cache-dir", dir},
                      testing::temp_dir() + "/disk-tier-second.log");
  EXPECT_EQ(second.wait_exit(kExitDeadline), 1) << second.log();
  EXPECT_NE(second.log().find("in use by another process"), std::string::npos) << second.log();
}

}  // namespace
}  // namespace trellis
