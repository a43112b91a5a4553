// The server against clients that are slow, clumsy or hostile, over raw loopback sockets: every
// loop is bounded in count and time, and each case names the failure it guards against.

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "raw_client.h"
#include "server_fixture.h"

namespace trellis::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

std::string status_line(const std::string& response) {
  return response.substr(0, response.find("\r\n"));
}

int threads_of_this_process() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

TEST(ServerHostileTest, PipelinedRequestsAreAllAnsweredInOrder) {
  TestServer server;
  RawClient client(server.server().port());
  ASSERT_TRUE(client.connected());
  const std::string completion = post_request(
      "/v1/completions", json{{"prompt", "a"}, {"max_tokens", 2}, {"temperature", 0}}.dump());
  ASSERT_TRUE(client.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n" + completion +
                          "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string replies = client.read_until(
      [](const std::string& r) { return r.find("\"object\":\"list\"") != std::string::npos; });
  EXPECT_EQ(count(replies, "HTTP/1.1 200 OK"), 3) << replies;
  const size_t health = replies.find("{\"status\":\"ok\"}");
  const size_t text = replies.find("text_completion");
  const size_t models = replies.find("\"object\":\"list\"");
  ASSERT_NE(health, std::string::npos);
  ASSERT_NE(text, std::string::npos);
  EXPECT_LT(health, text);
  EXPECT_LT(text, models);
}

TEST(ServerHostileTest, HalfClosedClientStillGetsItsResponse) {
  TestServer server;
  RawClient client(server.server().port());
  ASSERT_TRUE(client.send(post_request(
      "/v1/completions", json{{"prompt", "a"}, {"max_tokens", 8}, {"temperature", 0}}.dump())));
  client.shutdown_write();  // done sending; still reading
  const std::string reply = client.read_all();
  EXPECT_EQ(status_line(reply), "HTTP/1.1 200 OK") << reply;
  EXPECT_NE(reply.find("\"choices\""), std::string::npos) << reply;
  // A GET after which the client half-closes is answered too.
  RawClient health(server.server().port());
  ASSERT_TRUE(health.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  health.shutdown_write();
  EXPECT_NE(health.read_all().find("{\"status\":\"ok\"}"), std::string::npos);
}

TEST(ServerHostileTest, SlowClientsStallNobodyAndAreDropped) {
  ServerConfig config;
  config.request_timeout = std::chrono::milliseconds(1500);
  config.max_concurrent_requests = 16;  // as with --max-queue 16: the slow ones hold no slot
  TestServer server(config);
  // 300 clients that sent part of their headers and then nothing (slowloris).
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < 300; ++i) {
    slow.push_back(std::make_unique<RawClient>(server.server().port()));
    ASSERT_TRUE(slow.back()->connected()) << i;
    ASSERT_TRUE(slow.back()->send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: "));
  }
  const int threads_under_load = threads_of_this_process();
  // Meanwhile a normal request is answered (the client would give up after 60 s).
  const HttpReply reply =
      server.post("/v1/completions", json{{"prompt", "a"}, {"max_tokens", 4}, {"temperature", 0}});
  EXPECT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(server.get("/health").status, 200);
  // And each slow client is dropped once its request deadline passes.
  int dropped = 0;
  for (auto& client : slow) {
    client->read_all(std::chrono::seconds(10));
    dropped += client->closed_by_server() ? 1 : 0;
  }
  EXPECT_EQ(dropped, 300);
  std::printf("threads in the test process with 300 slow connections open: %d\n",
              threads_under_load);
}

TEST(ServerHostileTest, OversizedOrTooManyHeadersGet431) {
  TestServer server;
  {
    RawClient client(server.server().port());
    std::string flood = "GET /health HTTP/1.1\r\nHost: x\r\n";
    for (int i = 0; i < 20000; ++i) flood += "X-Flood-" + std::to_string(i) + ": y\r\n";
    client.send(flood + "\r\n");  // the server may close before it has all of it
    const std::string reply = client.read_all();
    EXPECT_EQ(status_line(reply), "HTTP/1.1 431 Request Header Fields Too Large") << reply;
    EXPECT_TRUE(client.closed_by_server());
  }
  {
    RawClient client(server.server().port());
    std::string many = "GET /health HTTP/1.1\r\nHost: x\r\n";
    for (int i = 0; i < 150; ++i) many += "X-" + std::to_string(i) + ": y\r\n";
    ASSERT_TRUE(client.send(many + "\r\n"));
    const std::string reply = client.read_all();
    EXPECT_EQ(status_line(reply), "HTTP/1.1 431 Request Header Fields Too Large") << reply;
    EXPECT_NE(reply.find("header fields"), std::string::npos) << reply;
  }
  EXPECT_EQ(server.get("/health").status, 200);
}

TEST(ServerHostileTest, ChunkedBodyBeyondMaxBodyGets413) {
  ServerConfig config;
  config.max_body_bytes = 2048;
  TestServer server(config);
  RawClient client(server.server().port());
  std::string request =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 10; ++i) request += "3e8\r\n" + std::string(1000, ' ') + "\r\n";
  client.send(request + "0\r\n\r\n");
  const std::string reply = client.read_all();
  EXPECT_EQ(status_line(reply), "HTTP/1.1 413 Payload Too Large") << reply;
  EXPECT_NE(reply.find("max-body"), std::string::npos);
}

TEST(ServerHostileTest, JsonNestingBombsAndHugeNumbersAre400) {
  TestServer server;
  const std::string bomb = std::string(1 << 20, '[') + std::string(1 << 20, ']');
  const HttpReply nested = server.post("/v1/completions", bomb);
  EXPECT_EQ(nested.status, 400) << nested.body.substr(0, 200);
  EXPECT_NE(nested.body.find("deeper than 64"), std::string::npos) << nested.body.substr(0, 200);
  const HttpReply tokenize = server.post("/tokenize", "{\"prompt\": " + bomb + "}");
  EXPECT_EQ(tokenize.status, 400);
  const HttpReply huge =
      server.post("/v1/completions", std::string(R"({"prompt": "x", "temperature": 1e400})"));
  EXPECT_EQ(huge.status, 400) << huge.body;
  EXPECT_EQ(huge.json()["error"]["type"], "invalid_request_error") << huge.body;
}

TEST(ServerHostileTest, LogitBiasIsRefusedNotIgnored) {
  TestServer server;
  const HttpReply reply = server.post(
      "/v1/completions", json{{"prompt", "x"}, {"max_tokens", 2}, {"logit_bias", {{"5", 10}}}});
  EXPECT_EQ(reply.status, 400) << reply.body;
  EXPECT_EQ(reply.json()["error"]["param"], "logit_bias") << reply.body;
  // An empty map asks for nothing and is accepted.
  const HttpReply empty = server.post(
      "/v1/completions", json{{"prompt", "x"}, {"max_tokens", 2}, {"logit_bias", json::object()}});
  EXPECT_EQ(empty.status, 200) << empty.body;
}

TEST(ServerHostileTest, ManyRangesGetOneOrdinaryResponse) {
  TestServer server;
  RawClient client(server.server().port());
  std::string ranges = "bytes=0-1";
  for (int i = 0; i < 200; ++i) ranges += ",0-1";
  ASSERT_TRUE(client.send("GET /health HTTP/1.1\r\nHost: x\r\nRange: " + ranges +
                          "\r\nConnection: close\r\n\r\n"));
  const std::string reply = client.read_all();
  EXPECT_EQ(status_line(reply), "HTTP/1.1 200 OK");
  EXPECT_EQ(reply.substr(reply.find("\r\n\r\n") + 4), R"({"status":"ok"})");
}

TEST(ServerHostileTest, ConnectionsBeyondTheLimitAreRefused) {
  ServerConfig config;
  config.max_connections = 4;
  TestServer server(config);
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::make_unique<RawClient>(server.server().port()));
    // A full request on each, so the server has surely accepted the connection.
    ASSERT_TRUE(held.back()->send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
    ASSERT_NE(held.back()
                  ->read_until([](const std::string& r) {
                    return r.find("{\"status\":\"ok\"}") != std::string::npos;
                  })
                  .find("200 OK"),
              std::string::npos);
  }
  RawClient extra(server.server().port());
  const std::string refused = extra.read_all();
  EXPECT_EQ(status_line(refused), "HTTP/1.1 503 Service Unavailable") << refused;
  EXPECT_TRUE(extra.closed_by_server());
  held.clear();  // once they leave, new clients are served again
  for (int i = 0; i < 200 && server.get("/health").status != 200; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(server.get("/health").status, 200);
}

TEST(ServerHostileTest, NonStreamingClientThatLeavesCancelsItsRequest) {
  // The whole context (4091 tokens take seconds), so only a cancellation ends it early.
  EngineConfig engine = TestServer::default_engine();
  engine.n_ctx = 4096;
  TestServer server({}, engine);
  {
    RawClient client(server.server().port());
    ASSERT_TRUE(client.send(post_request(
        "/v1/completions",
        json{{"prompt", {1, 300, 301}}, {"max_tokens", 4093}, {"ignore_eos", true}}.dump())));
    // Leave once the engine holds the request's blocks.
    for (int i = 0; i < 1000 && server.engine().stats().n_blocks_in_use == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_GT(server.engine().stats().n_blocks_in_use, 0);
  }  // closes the socket without reading the response
  for (int i = 0; i < 1000 && server.server().service()->server_metrics().n_finished() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(server.metric("requests_finished_total{finish_reason=\"cancelled\"}"), 1);
  EXPECT_EQ(server.metric("requests_finished_total{finish_reason=\"length\"}"), 0);
  EXPECT_LT(server.metric("generation_tokens_total"), 4093) << "generation stopped early";
  EXPECT_EQ(server.engine().stats().n_blocks_in_use, 0);
}

// A prompt that cannot fit the context even at the most bytes per token is refused before it is
// tokenized (the test model's context: 256 tokens); before, a 4 MB prompt was tokenized first
// (150-175 MB and seconds of CPU) and then refused by its token count.
TEST(ServerHostileTest, PromptsTooLongForTheContextAreRefusedBeforeTokenizing) {
  TestServer server;
  const std::string text(200000, 'a');
  const HttpReply completion =
      server.post("/v1/completions", json{{"prompt", text}, {"max_tokens", 1}});
  EXPECT_EQ(completion.status, 400) << completion.body;
  EXPECT_EQ(completion.json()["error"]["param"], "prompt") << completion.body;
  EXPECT_NE(completion.body.find("200000 bytes long"), std::string::npos) << completion.body;
  const HttpReply chat = server.post("/v1/chat/completions",
                                     json{{"messages", {{{"role", "user"}, {"content", text}}}}});
  EXPECT_EQ(chat.status, 400) << chat.body;
  EXPECT_EQ(chat.json()["error"]["param"], "messages") << chat.body;
  EXPECT_NE(chat.body.find("bytes long"), std::string::npos) << chat.body;
  const HttpReply tokenize = server.post("/tokenize", json{{"prompt", text}});
  EXPECT_EQ(tokenize.status, 400) << tokenize.body;
  // A prompt that may fit is still tokenized and judged by its tokens.
  const HttpReply fits =
      server.post("/v1/completions", json{{"prompt", "a b c"}, {"max_tokens", 1}});
  EXPECT_EQ(fits.status, 200) << fits.body;
}

// The memory that requests in flight may hold has a bound (--max-request-memory), checked from
// the declared body size before the body is read; before, 16 clients with 4 MB bodies each held
// their bodies and everything made of them at once, with no bound but the queue's 256 requests.
TEST(ServerHostileTest, RequestMemoryHasABoundCheckedBeforeTheBodyIsRead) {
  ServerConfig config;
  config.max_body_bytes = 1 << 20;
  config.max_request_memory = kRequestMemoryPerBodyByte * (3 << 19);  // one 1 MiB body, not two
  TestServer server(config);
  auto head_of = [](size_t body_bytes) {
    return "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           "Content-Length: " +
           std::to_string(body_bytes) + "\r\n\r\n";
  };
  auto holder = std::make_unique<RawClient>(server.server().port());
  ASSERT_TRUE(holder->send(head_of(1000000) + "{\"prompt\": \""));  // the rest never comes
  std::this_thread::sleep_for(std::chrono::milliseconds(200));      // its head has been read
  RawClient second(server.server().port());
  ASSERT_TRUE(second.send(head_of(1000000)));
  const std::string refused = second.read_all(std::chrono::milliseconds(3000));
  EXPECT_EQ(status_line(refused), "HTTP/1.1 503 Service Unavailable") << refused;
  EXPECT_NE(refused.find("--max-request-memory"), std::string::npos) << refused;
  // Small requests still fit beside the one held.
  EXPECT_EQ(server.post("/v1/completions", json{{"prompt", "a"}, {"max_tokens", 1}}).status, 200);
  holder.reset();  // the holder leaves: its share comes back
  bool served = false;
  for (int i = 0; i < 100 && !served; ++i) {
    RawClient third(server.server().port());
    const std::string body = json{{"prompt", std::string(900000, 'b')}, {"max_tokens", 1}}.dump();
    third.send(head_of(body.size()) + body);
    const std::string reply = third.read_until(
        [](const std::string& r) { return r.find('}') != std::string::npos; },
        std::chrono::milliseconds(3000));
    served = status_line(reply) != "HTTP/1.1 503 Service Unavailable";
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(served) << "the departed client's share never came back";
}

// Streaming requests queued behind a busy slot are cancelled as soon as their clients leave;
// before, they stayed queued until admitted (or until a keep-alive write failed seconds later) and
// then ran for nobody.
TEST(ServerHostileTest, QueuedStreamingClientsThatLeaveAreCancelledAtOnce) {
  EngineConfig engine = TestServer::default_engine();
  engine.n_ctx = 4096;
  engine.scheduler.max_seqs = 1;  // one slot: the others queue
  TestServer server({}, engine);
  auto stream_body = [](int max_tokens) {
    return json{{"prompt", {1, 300, 301}},
                {"max_tokens", max_tokens},
                {"ignore_eos", true},
                {"stream", true}}
        .dump();
  };
  RawClient busy(server.server().port());
  ASSERT_TRUE(busy.send(post_request("/v1/completions", stream_body(4093))));
  for (int i = 0; i < 1000 && server.engine().stats().n_blocks_in_use == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  constexpr int kQueued = 5;
  {
    std::vector<std::unique_ptr<RawClient>> queued;
    for (int i = 0; i < kQueued; ++i) {
      queued.push_back(std::make_unique<RawClient>(server.server().port()));
      ASSERT_TRUE(queued.back()->send(post_request("/v1/completions", stream_body(8))));
    }
    for (int i = 0; i < 1000 && server.engine().stats().n_waiting < kQueued; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_EQ(server.engine().stats().n_waiting, kQueued);
  }  // the five clients close their sockets
  const auto deadline = Clock::now() + std::chrono::milliseconds(1500);
  while (Clock::now() < deadline &&
         (server.engine().stats().n_waiting > 0 ||
          server.server().service()->server_metrics().n_finished() < kQueued))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(server.engine().stats().n_waiting, 0);
  EXPECT_EQ(server.metric("requests_finished_total{finish_reason=\"cancelled\"}"), kQueued);
  EXPECT_EQ(server.metric("requests_finished_total{finish_reason=\"length\"}"), 0)
      << "the busy request ended first: it no longer holds the slot";
}

// `Expect: 100-continue` must not stretch the request's deadline (the interim write used to set
// the write deadline, 30 s, in place of the request's); any other expectation gets 417 at once.
TEST(ServerHostileTest, ExpectationsKeepTheRequestDeadlineOrGet417) {
  ServerConfig config;
  config.request_timeout = std::chrono::milliseconds(800);
  config.write_timeout = std::chrono::milliseconds(8000);
  TestServer server(config);
  RawClient client(server.server().port());
  ASSERT_TRUE(
      client.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  "Expect: 100-continue\r\nContent-Length: 50\r\n\r\n"));
  const auto start = Clock::now();
  const std::string got = client.read_all(std::chrono::milliseconds(5000));  // no body follows
  const auto waited = Clock::now() - start;
  EXPECT_EQ(status_line(got), "HTTP/1.1 100 Continue") << got;
  EXPECT_TRUE(client.closed_by_server()) << "still open after 5 s: the deadline was stretched";
  EXPECT_LT(waited, std::chrono::milliseconds(4000));

  RawClient other(server.server().port());
  ASSERT_TRUE(other.send(post_request("/v1/completions", R"({"prompt":"a","max_tokens":1})",
                                      "Expect: something-else\r\n")));
  const std::string refused = other.read_all(std::chrono::milliseconds(3000));
  EXPECT_EQ(status_line(refused), "HTTP/1.1 417 Expectation Failed") << refused;
  EXPECT_NE(refused.find("something-else"), std::string::npos) << refused;
}

// HEAD is served wherever GET is (headers only); a 405 says which methods the path has;
// absolute-form targets are accepted; a transfer coding the server cannot decode gets 501.
TEST(ServerHostileTest, HttpMethodsTargetsAndCodingsFollowTheStandard) {
  TestServer server;
  const std::string models_body = server.get("/v1/models").body;
  ASSERT_FALSE(models_body.empty());
  {
    RawClient client(server.server().port());
    // HEAD, then a GET on the same connection: the GET's answer must follow the HEAD's headers
    // directly (a body after them would be read as the next response).
    ASSERT_TRUE(
        client.send("HEAD /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
                    "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
    const std::string replies = client.read_until(
        [](const std::string& r) { return r.find("{\"status\":\"ok\"}") != std::string::npos; });
    EXPECT_EQ(status_line(replies), "HTTP/1.1 200 OK") << replies;
    EXPECT_NE(replies.find("Content-Length: " + std::to_string(models_body.size()) + "\r\n"),
              std::string::npos)
        << replies;
    const size_t head_end = replies.find("\r\n\r\n");
    ASSERT_NE(head_end, std::string::npos);
    EXPECT_EQ(replies.compare(head_end + 4, 9, "HTTP/1.1 "), 0) << "a body followed HEAD:\n"
                                                                << replies;
  }
  auto exchange = [&](const std::string& request) {
    RawClient client(server.server().port());
    EXPECT_TRUE(client.send(request));
    return client.read_until([](const std::string& r) { return r.find("}") != std::string::npos; });
  };
  const std::string post_on_get = exchange(post_request("/v1/models", "{}"));
  EXPECT_EQ(status_line(post_on_get), "HTTP/1.1 405 Method Not Allowed") << post_on_get;
  EXPECT_NE(post_on_get.find("\r\nAllow: GET, HEAD\r\n"), std::string::npos) << post_on_get;
  const std::string get_on_post = exchange("GET /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(status_line(get_on_post), "HTTP/1.1 405 Method Not Allowed") << get_on_post;
  EXPECT_NE(get_on_post.find("\r\nAllow: POST\r\n"), std::string::npos) << get_on_post;

  const std::string absolute =
      exchange("GET http://localhost:8080/v1/models?x=1 HTTP/1.1\r\nHost: localhost\r\n\r\n");
  EXPECT_EQ(status_line(absolute), "HTTP/1.1 200 OK") << absolute;
  EXPECT_NE(absolute.find("\"object\":\"list\""), std::string::npos) << absolute;

  const std::string body = R"({"prompt":"a","max_tokens":1})";
  char size[16];
  std::snprintf(size, sizeof size, "%zx", body.size());
  const std::string gzip = exchange(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: gzip, chunked\r\n\r\n" +
      std::string(size) + "\r\n" + body + "\r\n0\r\n\r\n");
  EXPECT_EQ(status_line(gzip), "HTTP/1.1 501 Not Implemented") << gzip;
  EXPECT_NE(gzip.find("gzip"), std::string::npos) << gzip;
}

TEST(ServerHostileTest, SecondServerOnATakenPortFailsToBind) {
  TestServer first;
  ServerConfig config;
  config.port = first.server().port();
  HttpServer second(config);
  const Status bound = second.bind();
  ASSERT_FALSE(bound.ok()) << "two servers on one port";
  EXPECT_NE(bound.error().message.find("in use"), std::string::npos) << bound.error().message;
}

}  // namespace
}  // namespace trellis::testing
