// The server against clients that are slow, clumsy or hostile, over raw loopback sockets: every
// loop is bounded in count and time, and each case names the failure it guards against.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "server_fixture.h"

namespace trellis::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// A plain TCP client; every read gives up after its timeout.
class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawClient() { close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  // False once the server has closed its side (the rest is then not sent).
  bool send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Reads until `done(received)` holds, the server closes, or the timeout passes.
  std::string read_until(const std::function<bool(const std::string&)>& done,
                         std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::string received;
    const auto deadline = Clock::now() + timeout;
    while (!done(received) && Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buffer[4096];
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) {
        closed_by_server_ = true;
        break;
      }
      received.append(buffer, static_cast<size_t>(n));
    }
    return received;
  }
  std::string read_all(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return read_until([](const std::string&) { return false; }, timeout);
  }
  bool closed_by_server() const { return closed_by_server_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool closed_by_server_ = false;
};

std::string post_request(const std::string& path, const std::string& body,
                         const std::string& extra_headers = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n" +
         extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

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
