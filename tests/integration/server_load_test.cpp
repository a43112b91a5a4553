// Load on the HTTP server (loopback, bounded in count and time): 64 concurrent streaming clients
// sharing a system prompt, a quarter of them leaving mid-stream. Afterwards no request holds a
// block (only the cache's tree does, and flushing it frees everything), the server still answers,
// and the metrics add up.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "server_fixture.h"

namespace trellis::testing {
namespace {

using nlohmann::json;

constexpr int kClients = 64;
constexpr int kLeaving = kClients / 4;
constexpr int kMaxTokens = 24;
constexpr int32_t kContext = 2048;
// A leaving client asks for all the room its context leaves (2048 - 87 tokens): whatever the
// speed, it hangs up long before that could be generated, so its generation ends only if the
// disconnect cancels it.
constexpr int kLeavingMaxTokens = kContext - 87;

TEST(ServerLoadTest, ConcurrentStreamsWithDisconnects) {
  EngineConfig engine = TestServer::default_engine();
  engine.n_ctx = kContext;
  TestServer server({}, engine);
  std::vector<TokenId> system_prompt = {1};
  for (int i = 0; i < 80; ++i) system_prompt.push_back(100 + (i * 7) % 500);

  std::atomic<int> completed{0}, left{0}, failed{0};
  std::atomic<int64_t> prompt_tokens{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      const bool leaves = c % 4 == 0;
      std::vector<TokenId> prompt = system_prompt;
      for (int i = 0; i < 6; ++i) prompt.push_back(300 + (c * 6 + i) % 200);
      EXPECT_EQ(static_cast<int>(prompt.size()), kContext - kLeavingMaxTokens);
      prompt_tokens += static_cast<int64_t>(prompt.size());
      httplib::Client client = server.client();
      std::string body;
      int chunks = 0;
      httplib::Request req = streaming_completion(
          prompt, leaves ? kLeavingMaxTokens : kMaxTokens,
          [&](const char* data, size_t size, uint64_t, uint64_t) {
            body.append(data, size);
            return !(leaves && ++chunks >= 3);  // a leaving client hangs up after a few events
          });
      httplib::Result r = client.send(req);
      if (leaves) {
        ++left;
      } else if (r && r->status == 200 && body.find("data: [DONE]") != std::string::npos) {
        ++completed;
      } else {
        ++failed;
        ADD_FAILURE() << "client " << c << ": "
                      << (r ? std::to_string(r->status) : httplib::to_string(r.error())) << " "
                      << body.substr(0, 200);
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(completed, kClients - kLeaving);
  EXPECT_EQ(left, kLeaving);
  EXPECT_EQ(failed, 0);

  for (int i = 0; i < 1000 && (server.server().service()->n_in_flight() > 0 ||
                               server.engine().stats().n_blocks_in_use > 0);
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(server.server().service()->n_in_flight(), 0);
  EXPECT_EQ(server.engine().stats().n_blocks_in_use, 0) << "no block is held by any request";
  EXPECT_TRUE(server.engine().check_invariants().ok());
  EXPECT_EQ(server.get("/health").status, 200) << "the server still answers";

  EXPECT_EQ(server.metric("requests_finished_total{finish_reason=\"length\"}"),
            kClients - kLeaving);
  EXPECT_EQ(server.metric("requests_finished_total{finish_reason=\"cancelled\"}"), kLeaving);
  EXPECT_EQ(server.metric("e2e_request_latency_seconds_count"), kClients);
  EXPECT_EQ(server.metric("prompt_tokens_total"), static_cast<double>(prompt_tokens));
  EXPECT_GE(server.metric("generation_tokens_total"), (kClients - kLeaving) * kMaxTokens);
  EXPECT_LT(server.metric("generation_tokens_total"),
            (kClients - kLeaving) * kMaxTokens + kLeaving * kLeavingMaxTokens)
      << "the clients that left stopped their generation";
  EXPECT_GT(server.metric("cached_prompt_tokens_total"), 0) << "the system prompt was shared";
  EXPECT_EQ(server.metric("kv_blocks_used"), 0);

  server.engine().flush_cache();
  const EngineStats stats = server.engine().stats();
  EXPECT_EQ(stats.n_blocks_free, stats.n_blocks_total) << "flushing the tree frees every block";
}

}  // namespace
}  // namespace trellis::testing
