// The HTTP server in-process on the tiny model: every endpoint, streaming against whole
// responses, n > 1, stop strings, logprobs, authentication, cache isolation in both directions,
// each bad input's error, client disconnects (blocks return to the pool), shutdown, and metrics
// that add up.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "server/auth.h"
#include "server_fixture.h"
#include "tokenizer/chat_template.h"

namespace trellis::testing {
namespace {

using nlohmann::json;

json greedy_completion(const json& prompt, int max_tokens) {
  return {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true}};
}

// The concatenated text of a completions or chat stream, and its usage chunk (null when none).
struct StreamResult {
  std::string text;
  json usage;
  std::vector<std::string> finish_reasons;
  bool done = false;
};

StreamResult read_stream(const std::string& body, bool chat) {
  StreamResult r;
  for (const std::string& payload : sse_payloads(body)) {
    if (payload == "[DONE]") {
      r.done = true;
      continue;
    }
    const json chunk = json::parse(payload);
    if (chunk.contains("usage") && !chunk["usage"].is_null()) r.usage = chunk["usage"];
    for (const json& choice : chunk["choices"]) {
      if (chat) {
        if (choice["delta"].contains("content"))
          r.text += choice["delta"]["content"].get<std::string>();
      } else {
        r.text += choice["text"].get<std::string>();
      }
      if (!choice["finish_reason"].is_null()) r.finish_reasons.push_back(choice["finish_reason"]);
    }
  }
  return r;
}

void wait_until_idle(TestServer& server) {
  for (int i = 0; i < 500 && (server.server().service()->n_in_flight() > 0 ||
                              server.engine().stats().n_blocks_in_use > 0);
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

TEST(ServerTest, HealthTurnsReadyOnlyWithTheEngine) {
  ServerConfig config;
  config.port = 0;
  HttpServer server(config);
  ASSERT_TRUE(server.bind().ok());
  std::thread serving([&] { server.serve(); });
  httplib::Client client("127.0.0.1", server.port());
  httplib::Result loading = client.Get("/health");
  ASSERT_TRUE(loading);
  EXPECT_EQ(loading->status, 503);
  EXPECT_NE(loading->body.find("loading"), std::string::npos);
  httplib::Result api = client.Post("/v1/completions", R"({"prompt":"x"})", "application/json");
  ASSERT_TRUE(api);
  EXPECT_EQ(api->status, 503);
  Result<std::unique_ptr<Engine>> engine =
      Engine::create(server_tiny_model(), TestServer::default_engine());
  ASSERT_TRUE(engine.ok());
  server.set_engine(**engine);
  httplib::Result ready = client.Get("/health");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  server.shutdown();
  serving.join();
}

TEST(ServerTest, CompletionEqualsTheEngineDirectly) {
  TestServer server;
  const std::vector<TokenId> prompt = {1, 50, 60, 70, 80, 90};
  const HttpReply reply = server.post("/v1/completions", greedy_completion(prompt, 12));
  ASSERT_EQ(reply.status, 200) << reply.body;
  const json body = reply.json();
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["model"], "tiny");
  EXPECT_EQ(body["choices"].size(), 1u);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["prompt_tokens"], 6);
  EXPECT_EQ(body["usage"]["completion_tokens"], 12);
  EXPECT_EQ(body["usage"]["total_tokens"], 18);
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);

  EngineRequest direct;
  direct.prompt = prompt;
  direct.max_tokens = 12;
  direct.sampling.temperature = 0;
  direct.ignore_eos = true;
  Result<RequestHandle> handle = server.engine().submit(direct);
  ASSERT_TRUE(handle.ok());
  EXPECT_EQ(body["choices"][0]["text"], handle->wait().text);

  const HttpReply again = server.post("/v1/completions", greedy_completion(prompt, 12));
  EXPECT_EQ(again.json()["choices"][0]["text"], body["choices"][0]["text"]);
  // All of the 6-token prompt but its last token, which is always computed (its logits are
  // needed): the match is capped at prompt length - 1.
  EXPECT_EQ(again.json()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 5)
      << "the same prompt again is served from the prefix cache";
}

TEST(ServerTest, StreamCarriesTheSameTextAsAWholeResponse) {
  TestServer server;
  json request = greedy_completion("Once upon a time", 20);
  const std::string whole = server.post("/v1/completions", request).json()["choices"][0]["text"];
  request["stream"] = true;
  request["stream_options"] = {{"include_usage", true}};
  const HttpReply streamed = server.post("/v1/completions", request);
  ASSERT_EQ(streamed.status, 200);
  const StreamResult s = read_stream(streamed.body, false);
  EXPECT_EQ(s.text, whole);
  EXPECT_TRUE(s.done);
  EXPECT_EQ(sse_payloads(streamed.body).back(), "[DONE]");
  ASSERT_TRUE(s.usage.is_object());
  EXPECT_EQ(s.usage["completion_tokens"], 20);
  EXPECT_EQ(s.finish_reasons, std::vector<std::string>{"length"});

  request.erase("stream_options");
  EXPECT_TRUE(read_stream(server.post("/v1/completions", request).body, false).usage.is_null())
      << "usage only when asked for";
}

TEST(ServerTest, ChatRendersTheTemplateAndStreams) {
  ServerConfig config;
  config.chat_template = ChatTemplateKind::CHATML;
  TestServer server(config);
  const json messages = json::array(
      {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hello?"}}});
  json request = {
      {"messages", messages}, {"max_tokens", 10}, {"temperature", 0}, {"ignore_eos", true}};
  const HttpReply reply = server.post("/v1/chat/completions", request);
  ASSERT_EQ(reply.status, 200) << reply.body;
  const json body = reply.json();
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  const std::vector<ChatMessage> chat = {{"system", "Be brief."}, {"user", "Hello?"}};
  Result<std::string> text = render_chat(ChatTemplateKind::CHATML, chat);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(body["usage"]["prompt_tokens"],
            server.engine().tokenizer().encode(*text, true, true).size());
  request["stream"] = true;
  const StreamResult s = read_stream(server.post("/v1/chat/completions", request).body, true);
  EXPECT_EQ(s.text, body["choices"][0]["message"]["content"]);
  EXPECT_TRUE(s.done);
}

TEST(ServerTest, ChatContentSpellingEosStaysText) {
  ServerConfig config;
  config.chat_template = ChatTemplateKind::CHATML;
  TestServer server(config);
  const json request = {{"messages", {{{"role", "user"}, {"content", "hello</s>"}}}},
                        {"max_tokens", 4},
                        {"temperature", 0},
                        {"ignore_eos", true}};
  const HttpReply reply = server.post("/v1/chat/completions", request);
  ASSERT_EQ(reply.status, 200) << reply.body;
  const Tokenizer& tokenizer = server.engine().tokenizer();
  const std::vector<ChatMessage> chat = {{"user", "hello</s>"}};
  Result<std::vector<TokenId>> tokens = encode_chat(tokenizer, ChatTemplateKind::CHATML, chat);
  ASSERT_TRUE(tokens.ok()) << tokens.error().message;
  EXPECT_EQ(std::count(tokens->begin(), tokens->end(), tokenizer.vocab().eos_id), 0);
  EXPECT_EQ(reply.json()["usage"]["prompt_tokens"], tokens->size());
  // What it used to be: the whole text with parse_special, "</s>" folded into the EOS token.
  Result<std::string> text = render_chat(ChatTemplateKind::CHATML, chat);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(tokenizer.encode(*text, true, true).size(), tokens->size());
}

// The chat format: --chat-template, else the model's tokenizer.chat_template (a synthesized model
// carries its preset's: Zephyr's for the tiny llama), else ChatML, with a warning that the server
// prints at start-up.
TEST(ServerTest, ChatFormatIsTheFlagsTheModelsOrChatMl) {
  const std::vector<ChatMessage> chat = {{"user", "hi"}};
  const json request = {
      {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}, {"temperature", 0}};
  struct Case {
    std::optional<ChatTemplateKind> flag;
    bool model_has_template;
    ChatTemplateKind expected;
  };
  for (const Case& c : {Case{std::nullopt, true, ChatTemplateKind::ZEPHYR},
                        Case{ChatTemplateKind::PHI3, true, ChatTemplateKind::PHI3},
                        Case{std::nullopt, false, ChatTemplateKind::CHATML},
                        Case{ChatTemplateKind::LLAMA3, false, ChatTemplateKind::LLAMA3}}) {
    SCOPED_TRACE(std::string(chat_template_name(c.expected)));
    ServerConfig config;
    config.chat_template = c.flag;
    TestServer server(config, TestServer::default_engine(),
                      testing::server_tiny_model(c.model_has_template));
    const OpenAiService& service = *server.server().service();
    EXPECT_EQ(service.chat_template(), c.expected);
    const std::string& warning = service.chat_template_warning();
    if (!c.flag && !c.model_has_template) {
      EXPECT_NE(warning.find("chat requests use ChatML"), std::string::npos) << warning;
      EXPECT_NE(warning.find("no tokenizer.chat_template key"), std::string::npos) << warning;
      EXPECT_NE(warning.find("--chat-template NAME"), std::string::npos) << warning;
    } else {
      EXPECT_EQ(warning, "");
    }
    const HttpReply reply = server.post("/v1/chat/completions", request);
    ASSERT_EQ(reply.status, 200) << reply.body;
    Result<std::vector<TokenId>> tokens =
        encode_chat(server.engine().tokenizer(), c.expected, chat);
    ASSERT_TRUE(tokens.ok());
    EXPECT_EQ(reply.json()["usage"]["prompt_tokens"], tokens->size()) << reply.body;
  }
}

TEST(ServerTest, ParallelSamplesShareThePrompt) {
  TestServer server;
  json request = greedy_completion("The cache holds", 8);
  request["n"] = 3;
  const json body = server.post("/v1/completions", request).json();
  ASSERT_EQ(body["choices"].size(), 3u) << body.dump();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(body["choices"][i]["index"], i);
    EXPECT_EQ(body["choices"][i]["text"], body["choices"][0]["text"]) << "greedy branches agree";
  }
  EXPECT_EQ(body["usage"]["completion_tokens"], 24);

  request["temperature"] = 1.0;
  request["seed"] = 42;
  const json first = server.post("/v1/completions", request).json();
  const json second = server.post("/v1/completions", request).json();
  EXPECT_EQ(first["choices"], second["choices"]) << "a seed makes sampled choices repeatable";
}

TEST(ServerTest, StopStringEndsTheText) {
  TestServer server;
  const std::string full = server.post("/v1/completions", greedy_completion("Stop here", 24))
                               .json()["choices"][0]["text"];
  ASSERT_GE(full.size(), 8u);
  const std::string stop = full.substr(full.size() / 2, 3);
  json request = greedy_completion("Stop here", 24);
  request["stop"] = stop;
  const json body = server.post("/v1/completions", request).json();
  EXPECT_EQ(body["choices"][0]["text"], full.substr(0, full.find(stop)));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
}

TEST(ServerTest, LogprobsOfGreedyTokensAreTheMaxima) {
  TestServer server;
  json request = greedy_completion("Numbers:", 6);
  request["logprobs"] = 2;
  const json body = server.post("/v1/completions", request).json();
  const json& lp = body["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 6u) << body.dump();
  ASSERT_EQ(lp["top_logprobs"].size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    const double chosen = lp["token_logprobs"][i];
    EXPECT_LE(chosen, 0.0);
    double best = -1e9;
    for (const auto& [token, value] : lp["top_logprobs"][i].items())
      best = std::max(best, value.get<double>());
    EXPECT_DOUBLE_EQ(chosen, best) << "greedy picks the most probable token";
  }
  // Streamed, the chunks carry the same log-probabilities, token by token.
  request["stream"] = true;
  const HttpReply stream = server.post("/v1/completions", request);
  ASSERT_EQ(stream.status, 200) << stream.body;
  std::vector<double> streamed;
  for (const std::string& payload : sse_payloads(stream.body)) {
    if (payload == "[DONE]") continue;
    const json chunk = json::parse(payload);
    const json& chunk_lp = chunk["choices"][0]["logprobs"];
    if (chunk_lp.is_null()) continue;
    for (const json& v : chunk_lp["token_logprobs"]) streamed.push_back(v.get<double>());
  }
  ASSERT_EQ(streamed.size(), 6u) << stream.body;
  for (size_t i = 0; i < 6; ++i)
    EXPECT_DOUBLE_EQ(streamed[i], lp["token_logprobs"][i].get<double>());
}

// The chunk's tokens spelled out ("" for a chunk without logprobs) and whether every token is
// whole text (no U+FFFD: a token that is part of a character spells as the replacement).
struct ChunkTokens {
  std::string spelled;
  size_t count = 0;
  bool whole = true;
};
ChunkTokens chunk_tokens(const json& choice, bool chat) {
  ChunkTokens out;
  const json& lp = choice["logprobs"];
  if (lp.is_null()) return out;
  const json& entries = chat ? lp["content"] : lp["tokens"];
  for (const json& entry : entries) {
    const std::string token = chat ? entry["token"].get<std::string>() : entry.get<std::string>();
    if (token.find("\xEF\xBF\xBD") != std::string::npos) out.whole = false;
    out.spelled += token;
    ++out.count;
  }
  return out;
}

// Each streamed chunk carries the logprobs of exactly the tokens whose text it carries; before, a
// chunk carried every entry sampled by the time it was written, and later chunks none.
TEST(ServerTest, StreamedLogprobsLineUpWithTheirChunks) {
  TestServer server;
  for (const bool chat : {false, true}) {
    SCOPED_TRACE(chat ? "chat" : "completions");
    json request = {{"max_tokens", 96},
                    {"temperature", 0},
                    {"ignore_eos", true},
                    {"n", 3},
                    {"stream", true},
                    {"seed", 7},
                    {"stream_options", {{"include_usage", true}}}};
    if (chat) {
      request["messages"] = {{{"role", "user"}, {"content", "Tell me a long story."}}};
      request["logprobs"] = true;
      request["top_logprobs"] = 1;
    } else {
      request["prompt"] = "Once upon a time";
      request["logprobs"] = 1;
    }
    const HttpReply reply = server.post(chat ? "/v1/chat/completions" : "/v1/completions", request);
    ASSERT_EQ(reply.status, 200) << reply.body;
    size_t n_text_chunks = 0;
    size_t n_entries = 0;
    size_t n_generated = 0;
    for (const std::string& payload : sse_payloads(reply.body)) {
      if (payload == "[DONE]") continue;
      const json chunk = json::parse(payload);
      if (chunk["choices"].empty()) {  // the usage chunk
        n_generated = chunk["usage"]["completion_tokens"].get<size_t>();
        continue;
      }
      const json& choice = chunk["choices"][0];
      const std::string text = chat ? choice["delta"].value("content", std::string())
                                    : choice["text"].get<std::string>();
      const ChunkTokens tokens = chunk_tokens(choice, chat);
      n_entries += tokens.count;
      if (text.empty()) continue;
      ++n_text_chunks;
      EXPECT_GE(tokens.count, 1u) << "a chunk with text but no tokens: " << payload;
      if (tokens.whole) {
        EXPECT_EQ(tokens.spelled, text) << payload;
      }
    }
    EXPECT_GE(n_text_chunks, 3u * 8u) << reply.body.substr(0, 2000);
    EXPECT_GT(n_generated, 0u);
    EXPECT_EQ(n_entries, n_generated) << "every generated token has one entry";
  }
}

TEST(ServerTest, TokenizeAndDetokenizeRoundTrip) {
  TestServer server;
  const json tokens = server.post("/tokenize", json{{"prompt", "hello world"}}).json();
  ASSERT_TRUE(tokens["tokens"].is_array()) << tokens.dump();
  EXPECT_EQ(tokens["count"], tokens["tokens"].size());
  EXPECT_EQ(tokens["max_model_len"], 256);
  const json text = server.post("/detokenize", json{{"tokens", tokens["tokens"]}}).json();
  EXPECT_NE(text["prompt"].get<std::string>().find("hello world"), std::string::npos);
  EXPECT_EQ(server.post("/detokenize", json{{"tokens", {1, 999999}}}).status, 400);
  EXPECT_EQ(server.post("/tokenize", json{{"prompt", 5}}).status, 400);
  const json models = server.get("/v1/models").json();
  EXPECT_EQ(models["data"][0]["id"], "tiny");
}

TEST(ServerTest, ApiKeysAreRequired) {
  ServerConfig config;
  config.api_keys = {"first-key", "second-key"};
  TestServer server(config);
  const json request = greedy_completion("x", 2);
  const HttpReply none = server.post("/v1/completions", request);
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.json()["error"]["type"], "authentication_error");
  EXPECT_EQ(server.post("/v1/completions", request, "second-kez").status, 401);
  EXPECT_EQ(server.post("/v1/completions", request, "second-key-").status, 401);
  EXPECT_EQ(server.post("/v1/completions", request, "second-key").status, 200);
  EXPECT_EQ(server.get("/v1/models").status, 401);
  EXPECT_EQ(server.get("/v1/models", "first-key").status, 200);
  EXPECT_EQ(server.get("/health").status, 200) << "health stays open for probes";
}

int cached_tokens(const TestServer& server, const json& request, const std::string& key) {
  const HttpReply reply = server.post("/v1/completions", request, key);
  EXPECT_EQ(reply.status, 200) << reply.body;
  return reply.json()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
}

TEST(ServerTest, CacheIsolationByKeyAndSalt) {
  std::vector<TokenId> prompt;
  for (int i = 0; i < 100; ++i) prompt.push_back(10 + i);
  const json request = greedy_completion(prompt, 2);
  {
    ServerConfig config;
    config.api_keys = {"alice", "bob"};
    config.cache_isolation = CacheIsolation::KEY;
    TestServer server(config);
    EXPECT_EQ(cached_tokens(server, request, "alice"), 0);
    EXPECT_GE(cached_tokens(server, request, "alice"), 96) << "the same key reuses its prefix";
    EXPECT_EQ(cached_tokens(server, request, "bob"), 0) << "another key never does";
    json salted = request;
    salted["cache_salt"] = "tenant-1";
    EXPECT_EQ(cached_tokens(server, salted, "alice"), 0) << "a salt narrows sharing";
    EXPECT_GE(cached_tokens(server, salted, "alice"), 96);
    EXPECT_EQ(cached_tokens(server, salted, "bob"), 0);
  }
  {
    ServerConfig config;  // no isolation: every client shares
    TestServer server(config);
    EXPECT_EQ(cached_tokens(server, request, "alice"), 0);
    EXPECT_GE(cached_tokens(server, request, "bob"), 96);
  }
}

TEST(ServerTest, BadInputGetsOpenAiErrors) {
  ServerConfig config;
  config.max_body_bytes = 2048;
  TestServer server(config);
  struct Case {
    std::string body;
    int status;
    std::string in_message;
  };
  const std::vector<Case> cases = {
      {"{bad json", 400, "JSON"},
      {"[1, 2]", 400, "object"},
      {R"({"prompt": "x", "max_tokens": "many"})", 400, "max_tokens"},
      {R"({"prompt": "x", "max_tokens": -1})", 400, "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 1000000})", 400, "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 255})", 400, "256"},
      {R"({"prompt": "x", "temperature": -2})", 400, "temperature"},
      {R"({"prompt": "x", "model": "gpt-9"})", 404, "gpt-9"},
      {R"({"prompt": [1, 2, 99999999]})", 400, "vocab"},
      {R"({})", 400, "prompt"},
      {std::string(R"({"prompt": ")") + std::string(3000, 'a') + "\"}", 413, "body"},
  };
  for (const Case& c : cases) {
    const HttpReply reply = server.post("/v1/completions", c.body);
    EXPECT_EQ(reply.status, c.status) << c.body.substr(0, 80) << " -> " << reply.body;
    const json error = reply.json();
    ASSERT_TRUE(error.contains("error")) << reply.body;
    EXPECT_NE(error["error"]["message"].get<std::string>().find(c.in_message), std::string::npos)
        << reply.body;
    EXPECT_TRUE(error["error"].contains("type"));
  }
  // A prompt longer than the context names both numbers.
  std::vector<TokenId> long_prompt(300, 42);
  const HttpReply too_long = server.post("/v1/completions", json{{"prompt", long_prompt}});
  EXPECT_EQ(too_long.status, 400);
  EXPECT_NE(too_long.body.find("256"), std::string::npos) << too_long.body;
  EXPECT_NE(too_long.body.find("300"), std::string::npos) << too_long.body;
  EXPECT_EQ(server.get("/v1/nothing").status, 404);
  EXPECT_EQ(server.get("/health").status, 200) << "still serving";
}

// A stream that asks for the whole context, so that it cannot end on its own before the tests
// below act on it (hang up, shut down): 4091 tokens of the tiny model, each step attending to
// everything before it, take 2.4 s on one thread of the 2-core test machine, while acting after
// the first event takes a write or two (a machine would have to be a thousand times faster to
// finish first). What the tests assert then holds whatever the speed, and fails if the action
// does not stop the generation (it would end with finish_reason "length", every token generated).
constexpr int32_t kLongContext = 4096;
const std::vector<TokenId> kLongPrompt = {1, 300, 301, 302, 303};
constexpr int kLongMaxTokens = kLongContext - 5;

EngineConfig long_context_engine() {
  EngineConfig engine = TestServer::default_engine();
  engine.n_ctx = kLongContext;
  return engine;
}

// The client side of a long stream: it keeps the bytes it received and, after its first event,
// either hangs up (disconnect_early) or stops reading until `release` is set.
struct HeldStream {
  std::thread thread;
  std::atomic<bool> started{false};
  std::atomic<bool> release{false};
  std::mutex mutex;
  std::string body;

  std::string received() {
    std::lock_guard<std::mutex> lock(mutex);
    return body;
  }
};

// Starts the stream; returns once its first event came (an event, not a delay).
void hold_stream(TestServer& server, HeldStream& held, bool disconnect_early) {
  held.thread = std::thread([&server, &held, disconnect_early] {
    httplib::Client client = server.client();
    httplib::Request req = streaming_completion(
        kLongPrompt, kLongMaxTokens, [&](const char* data, size_t size, uint64_t, uint64_t) {
          {
            std::lock_guard<std::mutex> lock(held.mutex);
            held.body.append(data, size);
          }
          held.started = true;
          if (disconnect_early) return false;  // the client goes away mid-stream
          while (!held.release) std::this_thread::sleep_for(std::chrono::milliseconds(5));
          return true;
        });
    client.send(req);
    held.started = true;
  });
  for (int i = 0; i < 2000 && !held.started; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

TEST(ServerTest, TooManyConcurrentRequestsGet429) {
  ServerConfig config;
  config.max_concurrent_requests = 1;
  TestServer server(config, long_context_engine());
  HeldStream held;
  hold_stream(server, held, false);
  ASSERT_TRUE(held.started);
  const HttpReply rejected = server.post("/v1/completions", greedy_completion("x", 2));
  EXPECT_EQ(rejected.status, 429) << rejected.body;
  EXPECT_EQ(rejected.json()["error"]["type"], "rate_limit_error");
  server.server().service()->begin_shutdown();  // cancels the held stream
  held.release = true;
  held.thread.join();
}

TEST(ServerTest, ClientDisconnectCancelsAndReleasesBlocks) {
  TestServer server({}, long_context_engine());
  HeldStream held;
  held.release = true;
  hold_stream(server, held, /*disconnect_early=*/true);
  held.thread.join();
  ASSERT_TRUE(held.started);
  wait_until_idle(server);
  EXPECT_EQ(server.server().service()->n_in_flight(), 0);
  const EngineStats stats = server.engine().stats();
  EXPECT_EQ(stats.n_blocks_in_use, 0) << "no request holds a block";
  EXPECT_EQ(server.metric("requests_finished_total{finish_reason=\"cancelled\"}"), 1);
  EXPECT_EQ(server.metric("requests_finished_total{finish_reason=\"length\"}"), 0);
  EXPECT_LT(server.metric("generation_tokens_total"), kLongMaxTokens) << "generation stopped early";
  server.engine().flush_cache();
  EXPECT_EQ(server.engine().stats().n_blocks_free, server.engine().stats().n_blocks_total);
}

TEST(ServerTest, ShutdownEndsRunningStreams) {
  TestServer server({}, long_context_engine());
  HeldStream held;
  held.release = true;
  hold_stream(server, held, false);
  ASSERT_TRUE(held.started);
  server.stop();  // returns once every connection ended
  held.thread.join();
  EXPECT_EQ(server.engine().stats().n_blocks_in_use, 0);
  // The stream ended because of the shutdown: it says so, and carries no normal finish.
  const std::string body = held.received();
  EXPECT_NE(body.find("server shutting down"), std::string::npos) << body.substr(0, 2000);
  EXPECT_EQ(body.find("\"finish_reason\":\"length\""), std::string::npos);
  EXPECT_NE(body.find("data: [DONE]"), std::string::npos);
}

// The same completion asked for again is drafted from the prefix cache (speculative decoding):
// the same text, and /metrics counts the drafted and kept tokens by source. A request that opts
// out drafts nothing.
TEST(ServerTest, SpeculationIsCountedBySourceAndCanBeTurnedOffPerRequest) {
  EngineConfig engine = TestServer::default_engine();
  engine.speculation.length.weigh_step_cost = false;  // lengths by acceptance: counts below
  TestServer server(ServerConfig{}, engine);
  const std::string accepted = "spec_decode_num_accepted_tokens_total{source=\"prefix_cache\"}";
  const std::string drafted = "spec_decode_num_draft_tokens_total{source=\"prefix_cache\"}";
  json request = greedy_completion("Tell the same story twice", 24);
  const std::string first = server.post("/v1/completions", request).json()["choices"][0]["text"];
  const double accepted_before = server.metric(accepted);
  request["speculative"] = false;
  const std::string unspeculated =
      server.post("/v1/completions", request).json()["choices"][0]["text"];
  EXPECT_EQ(unspeculated, first);
  EXPECT_EQ(server.metric(accepted), accepted_before);
  request["speculative"] = true;
  const std::string again = server.post("/v1/completions", request).json()["choices"][0]["text"];
  EXPECT_EQ(again, first);
  EXPECT_GE(server.metric(accepted), accepted_before + 16);  // most of the 23 decoded tokens
  EXPECT_GE(server.metric(drafted), server.metric(accepted));
  EXPECT_GE(server.metric("spec_decode_num_drafts_total{source=\"ngram_pool\"}"), 0);
  request["speculative"] = "no";
  const HttpReply refused = server.post("/v1/completions", request);
  EXPECT_EQ(refused.status, 400);
  EXPECT_NE(refused.body.find("speculative"), std::string::npos) << refused.body;
}

// A server with a draft model (the model's own file, which agrees on every greedy token): a fresh
// completion is drafted by it, comes out as without speculation, and /metrics counts it under
// source="draft_model".
TEST(ServerTest, ADraftModelDraftsFreshCompletionsAndIsCounted) {
  const json request = greedy_completion("A story nobody asked for before", 24);
  std::string plain_text;
  {
    EngineConfig plain = TestServer::default_engine();
    plain.speculation.sources.fill(false);
    TestServer server(ServerConfig{}, plain);
    plain_text = server.post("/v1/completions", request).json()["choices"][0]["text"];
  }
  EngineConfig engine = TestServer::default_engine();
  engine.speculation.sources = {false, false, false, true};
  engine.speculation.length.weigh_step_cost = false;  // lengths by acceptance: counts below
  engine.draft_model = server_tiny_model();
  TestServer server(ServerConfig{}, engine);
  const std::string text = server.post("/v1/completions", request).json()["choices"][0]["text"];
  EXPECT_EQ(text, plain_text);
  const std::string source = "{source=\"draft_model\"}";
  EXPECT_GE(server.metric("spec_decode_num_accepted_tokens_total" + source), 16);
  EXPECT_GE(server.metric("spec_decode_num_draft_tokens_total" + source),
            server.metric("spec_decode_num_accepted_tokens_total" + source));
}

TEST(ServerTest, MetricsAddUp) {
  TestServer server;
  int64_t prompt_tokens = 0, cached = 0, generated = 0;
  for (int i = 0; i < 5; ++i) {
    const json body = server
                          .post("/v1/completions",
                                greedy_completion("Same start " + std::to_string(i % 2), 4 + i))
                          .json();
    prompt_tokens += body["usage"]["prompt_tokens"].get<int64_t>();
    cached += body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
    generated += body["usage"]["completion_tokens"].get<int64_t>();
  }
  EXPECT_EQ(server.metric("prompt_tokens_total"), prompt_tokens);
  EXPECT_EQ(server.metric("cached_prompt_tokens_total"), cached);
  EXPECT_EQ(server.metric("prefix_cache_hits_total"), cached);
  EXPECT_EQ(server.metric("generation_tokens_total"), generated);
  EXPECT_EQ(server.metric("requests_finished_total{finish_reason=\"length\"}"), 5);
  EXPECT_EQ(server.metric("e2e_request_latency_seconds_count"), 5);
  EXPECT_EQ(server.metric("time_to_first_token_seconds_count"), 5);
  EXPECT_DOUBLE_EQ(server.metric("prefix_cache_hit_rate"),
                   static_cast<double>(cached) / prompt_tokens);
  EXPECT_GT(cached, 0);
  EXPECT_EQ(server.metric("kv_blocks_used"), 0);
  EXPECT_EQ(server.metric("kv_blocks_total"),
            server.metric("kv_blocks_free") + server.metric("kv_blocks_cached"));
}

}  // namespace
}  // namespace trellis::testing
