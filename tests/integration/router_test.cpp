// The router (RouterService on the HTTP transport) in front of in-process `trellis serve`
// replicas on the tiny model, and of scripted peers for the failure paths: where requests go
// under each policy and what the replicas' caches gain from it, failover before the first byte,
// an error event after it, replicas leaving and rejoining rotation, keys and isolation, client
// disconnects reaching the replica, and 64 concurrent streams with a quarter of the clients
// leaving early (no block held anywhere afterwards).
#include <gtest/gtest.h>

#include <httplib.h>

#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fake_replica.h"
#include "raw_client.h"
#include "router/router_service.h"
#include "server/http_server.h"
#include "server_fixture.h"

namespace trellis::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr auto kHealthInterval = std::chrono::milliseconds(100);

// The router on a free loopback port.
class TestRouter {
 public:
  TestRouter(const std::vector<std::string>& urls, RoutingPolicy policy, ServerConfig server = {}) {
    RouterConfig config;
    for (const std::string& url : urls) config.replicas.push_back(*parse_replica_url(url));
    config.routing.policy = policy;
    config.health_interval = kHealthInterval;
    config.timeouts.read = std::chrono::milliseconds(30000);
    server.port = 0;
    server.log_requests = false;
    service_ = std::make_unique<RouterService>(config, server);
    server_ = std::make_unique<HttpServer>(server, RouterService::endpoints());
    const Status bound = server_->bind();
    EXPECT_TRUE(bound.ok()) << (bound.ok() ? "" : bound.error().message);
    thread_ = std::thread([this] { server_->serve(); });
    server_->set_api(*service_);
  }
  ~TestRouter() {
    server_->shutdown();
    thread_.join();
  }

  httplib::Client client() const { return loopback_client(server_->port()); }
  HttpReply post(const std::string& path, const json& body, const std::string& key = "") const {
    return loopback_post(server_->port(), path, body.dump(), key);
  }
  HttpReply get(const std::string& path) const { return loopback_get(server_->port(), path); }
  // A router metric sample "name{labels}" (without the prefix); -1 when absent.
  double metric(const std::string& sample) const {
    const std::string text = get("/metrics").body;
    const std::string key = "\ntrellis_router:" + sample + " ";
    const size_t at = text.find(key);
    if (at == std::string::npos) return -1;
    return std::stod(text.substr(at + key.size()));
  }
  RouterService& service() { return *service_; }
  int port() const { return server_->port(); }

 private:
  std::unique_ptr<RouterService> service_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
};

// A replica: the tiny model (which has no chat template of its own) served with ChatML.
class Replica : public TestServer {
 public:
  Replica() : TestServer(config()) {}

 private:
  static ServerConfig config() {
    ServerConfig c;
    c.chat_template = ChatTemplateKind::CHATML;
    return c;
  }
};

std::string replica_url(TestServer& replica) {
  return "http://127.0.0.1:" + std::to_string(replica.server().port());
}

std::string health_label(int replica, const std::string& url) {
  return "replica_healthy{replica=\"" + std::to_string(replica) + "\",url=\"" + url + "\"}";
}

json chat(const std::string& system, const std::string& user, int max_tokens = 2) {
  return json{{"messages",
               {{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", user}}}},
              {"max_tokens", max_tokens},
              {"temperature", 0}};
}

int64_t cached_tokens(const HttpReply& reply) {
  const json body = reply.json();
  if (body.is_discarded() || !body.contains("usage")) return -1;
  return body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
}

// Waits (bounded) until `condition` holds.
template <typename Condition>
bool eventually(Condition condition, std::chrono::milliseconds limit = 10000ms) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// A replica is idle and holds no block for a request (cached blocks may stay).
bool replica_idle(const TestServer& replica) {
  return replica.metric("num_requests_running") == 0 &&
         replica.metric("num_requests_waiting") == 0 && replica.metric("kv_blocks_used") == 0;
}

std::string system_prompt(char topic) {
  std::string text = "You are the assistant of group ";
  text += topic;
  text += ". ";
  for (int i = 0; i < 5; ++i)
    text += std::string("Rule ") + topic + std::to_string(i) + ": be exact. ";
  return text;
}

// Three groups, each sending four questions that share its system prompt, one at a time; the
// cached prompt tokens of the replies after each group's first.
int64_t cached_in_groups(TestRouter& router, const std::string& tag) {
  int64_t cached = 0;
  for (char group : {'a', 'b', 'c'}) {
    for (int q = 0; q < 4; ++q) {
      HttpReply reply = router.post("/v1/chat/completions", chat(tag + system_prompt(group),
                                                                 "question " + std::to_string(q)));
      EXPECT_EQ(reply.status, 200) << reply.body;
      if (q > 0) cached += cached_tokens(reply);
    }
  }
  return cached;
}

TEST(Router, CacheAwareKeepsEachGroupOnOneReplica) {
  Replica a, b;
  TestRouter router({replica_url(a), replica_url(b)}, RoutingPolicy::CACHE_AWARE);
  const int64_t cached = cached_in_groups(router, "cache-aware ");
  // Every group's questions after its first matched its replica's tree.
  EXPECT_EQ(router.service().metrics().decisions(RouteReason::CACHE_MATCH), 9u);
  EXPECT_EQ(router.metric("decisions_total{reason=\"cache_match\"}"), 9);
  // New groups spread over both replicas (equal load, the smaller tree wins).
  EXPECT_GT(router.service().metrics().requests(0), 0u);
  EXPECT_GT(router.service().metrics().requests(1), 0u);

  // Round robin over the same replicas, with new prompts: a group's questions alternate, so
  // half of them find their system prompt cached at best.
  TestRouter round_robin({replica_url(a), replica_url(b)}, RoutingPolicy::ROUND_ROBIN);
  const int64_t rr_cached = cached_in_groups(round_robin, "round-robin ");
  EXPECT_GT(cached, rr_cached);
  // Each cache-aware follow-up found at least its system prompt.
  const HttpReply tokens = a.post("/tokenize", json{{"prompt", system_prompt('a')}});
  const int64_t system_tokens = static_cast<int64_t>(tokens.json()["tokens"].size());
  EXPECT_GE(cached, 9 * (system_tokens - 16));
}

// A replica of several models: its health, its model list, and completions that name it.
std::string models_replica(const std::string& request, const std::string& name,
                           const std::vector<std::string>& models) {
  const auto reply = [](const json& body) {
    return FakeReplica::head(200, "application/json") + body.dump();
  };
  if (request.rfind("GET /health", 0) == 0) return reply({{"status", "ok"}});
  if (request.rfind("GET /v1/models", 0) == 0) {
    json data = json::array();
    for (const std::string& id : models) data.push_back({{"id", id}, {"object", "model"}});
    return reply({{"object", "list"}, {"data", data}});
  }
  return reply({{"replica", name}});
}

TEST(Router, RoutesEachModelToTheReplicasThatServeIt) {
  FakeReplica first([](const std::string& r) { return models_replica(r, "first", {"a", "b"}); });
  FakeReplica second([](const std::string& r) { return models_replica(r, "second", {"b", "c"}); });
  TestRouter router({first.url(), second.url()}, RoutingPolicy::ROUND_ROBIN);
  ASSERT_TRUE(eventually([&] { return router.get("/v1/models").json()["data"].size() == 3; }))
      << router.get("/v1/models").body;
  const json listed = router.get("/v1/models").json();
  EXPECT_EQ(listed["data"][0]["id"], "a");
  EXPECT_EQ(listed["data"][2]["id"], "c");
  std::set<std::string> served_b;
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(router.post("/v1/completions", {{"model", "a"}, {"prompt", "x"}}).json()["replica"],
              "first");
    EXPECT_EQ(router.post("/v1/completions", {{"model", "c"}, {"prompt", "x"}}).json()["replica"],
              "second");
  }
  for (int i = 0; i < 4; ++i) {
    served_b.insert(
        router.post("/v1/completions", {{"model", "b"}, {"prompt", "x"}}).json()["replica"]);
  }
  EXPECT_EQ(served_b, (std::set<std::string>{"first", "second"}));  // both serve b
  EXPECT_EQ(router.post("/tokenize", {{"model", "c"}, {"prompt", "x"}}).json()["replica"],
            "second");
  const HttpReply unknown = router.post("/v1/completions", {{"model", "z"}, {"prompt", "x"}});
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(unknown.body.find("`a`, `b`, `c`"), std::string::npos) << unknown.body;
}

TEST(Router, RetriesAnotherReplicaBeforeTheFirstByte) {
  Replica good;
  const std::vector<std::string> failures = {
      FakeReplica::head(503, "application/json") + R"({"error":{"message":"busy"}})",
      "",  // the connection closes without an answer
      FakeReplica::stream_head() + FakeReplica::chunk("data: {\"choices\":["),  // half an event
  };
  for (const std::string& failure : failures) {
    FakeReplica bad([&](const std::string& request) {
      return request.rfind("GET /health", 0) == 0
                 ? FakeReplica::head(200, "application/json") + R"({"status":"ok"})"
                 : failure;
    });
    TestRouter router({bad.url(), replica_url(good)}, RoutingPolicy::ROUND_ROBIN);
    for (bool stream : {false, true}) {
      for (int i = 0; i < 2; ++i) {  // round robin: one of each pair goes to the bad one first
        json body = chat("Failover.", "try " + std::to_string(i));
        body["stream"] = stream;
        HttpReply reply = router.post("/v1/chat/completions", body);
        ASSERT_EQ(reply.status, 200) << failure << "\n" << reply.body;
        if (stream) {
          const std::vector<std::string> events = sse_payloads(reply.body);
          ASSERT_FALSE(events.empty());
          EXPECT_EQ(events.back(), "[DONE]");
          EXPECT_EQ(reply.body.find("error"), std::string::npos) << reply.body;
        }
      }
    }
    // At least the first request went to the bad replica (a replica that hangs up is then out
    // of rotation; one that answers 503 stays in it).
    EXPECT_GE(router.metric("retries_total"), 1) << failure;
    EXPECT_GE(router.service().metrics().requests(0), 1u);
    EXPECT_EQ(router.metric("upstream_errors_total{replica=\"0\",url=\"" + bad.url() + "\"}"),
              static_cast<double>(router.service().metrics().requests(0)));
  }
}

TEST(Router, AStreamThatBreaksAfterItsFirstByteEndsWithAnErrorEvent) {
  const std::string first = R"(data: {"choices":[{"index":0,"text":"Hel"}]})";
  FakeReplica broken([&](const std::string& request) {
    if (request.rfind("GET /health", 0) == 0)
      return FakeReplica::head(200, "application/json") + R"({"status":"ok"})";
    return FakeReplica::stream_head() + FakeReplica::chunk(first + "\n\n") +
           FakeReplica::chunk("data: {\"cho");
  });
  TestRouter router({broken.url()}, RoutingPolicy::CACHE_AWARE);
  json body = chat("Break.", "now");
  body["stream"] = true;
  HttpReply reply = router.post("/v1/chat/completions", body);
  ASSERT_EQ(reply.status, 200);
  const std::vector<std::string> events = sse_payloads(reply.body);
  ASSERT_EQ(events.size(), 3u) << reply.body;
  EXPECT_EQ("data: " + events[0], first);
  const json error = json::parse(events[1], nullptr, false);
  ASSERT_FALSE(error.is_discarded()) << events[1];
  EXPECT_NE(error["error"]["message"].get<std::string>().find("failed during the stream"),
            std::string::npos);
  EXPECT_EQ(events[2], "[DONE]");
  EXPECT_EQ(router.metric("broken_streams_total"), 1);
  EXPECT_EQ(broken.requests() > 0, true);
}

TEST(Router, AReplicaThatGoesDownLeavesRotationAndComesBack) {
  Replica good;
  std::atomic<bool> up{true};
  FakeReplica flaky([&](const std::string& request) {
    if (!up) return std::string();  // hangs up: down
    if (request.rfind("GET /health", 0) == 0)
      return FakeReplica::head(200, "application/json") + R"({"status":"ok"})";
    return FakeReplica::head(503, "application/json") + R"({"error":{"message":"no"}})";
  });
  TestRouter router({flaky.url(), replica_url(good)}, RoutingPolicy::ROUND_ROBIN);
  const std::string flaky_health = health_label(0, flaky.url());
  ASSERT_TRUE(eventually([&] { return router.metric(flaky_health) == 1; }));
  up = false;
  EXPECT_TRUE(eventually([&] { return router.metric(flaky_health) == 0; }));
  const int before = flaky.requests();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(router.post("/v1/chat/completions", chat("Down.", std::to_string(i))).status, 200);
  }
  // Out of rotation: only health checks reach it (at most a few in that time), never requests.
  EXPECT_EQ(router.service().metrics().requests(0), 0u);
  EXPECT_EQ(router.get("/health").status, 200);
  up = true;
  EXPECT_TRUE(eventually([&] { return router.metric(flaky_health) == 1; }));
  EXPECT_GT(flaky.requests(), before);
}

TEST(Router, NoHealthyReplicaIsAClearError) {
  std::string dead_url;
  {
    FakeReplica gone([](const std::string&) { return std::string(); });
    dead_url = gone.url();
  }  // nothing listens there now
  TestRouter router({dead_url}, RoutingPolicy::CACHE_AWARE);
  HttpReply reply = router.post("/v1/chat/completions", chat("Nobody.", "there?"));
  EXPECT_TRUE(reply.status == 502 || reply.status == 503) << reply.status;
  const json body = reply.json();
  ASSERT_TRUE(body.contains("error")) << reply.body;
  EXPECT_TRUE(eventually([&] { return router.get("/health").status == 503; }));
  HttpReply later = router.post("/v1/chat/completions", chat("Nobody.", "still?"));
  EXPECT_EQ(later.status, 503);
  EXPECT_NE(later.body.find("no healthy replica"), std::string::npos) << later.body;
  EXPECT_EQ(router.post("/v1/chat/completions", json::array()).status, 400);
}

TEST(Router, KeysAreCheckedAndNamespacesStayApart) {
  Replica replica;
  ServerConfig front;
  front.api_keys = {"key-one", "key-two"};
  front.cache_isolation = CacheIsolation::KEY;
  TestRouter router({replica_url(replica)}, RoutingPolicy::CACHE_AWARE, front);
  const json body = chat(system_prompt('k'), "secret question");
  EXPECT_EQ(router.post("/v1/chat/completions", body).status, 401);
  EXPECT_EQ(router.post("/v1/chat/completions", body, "wrong").status, 401);
  EXPECT_EQ(cached_tokens(router.post("/v1/chat/completions", body, "key-one")), 0);
  EXPECT_GT(cached_tokens(router.post("/v1/chat/completions", body, "key-one")), 0);
  // The other key reaches the same replica (the only one) and finds nothing of the first's.
  EXPECT_EQ(cached_tokens(router.post("/v1/chat/completions", body, "key-two")), 0);
  EXPECT_EQ(router.service().metrics().decisions(RouteReason::CACHE_MATCH), 1u);
}

TEST(Router, AClientThatLeavesCancelsItsRequestOnTheReplica) {
  Replica replica;
  TestRouter router({replica_url(replica)}, RoutingPolicy::CACHE_AWARE);
  httplib::Client client = router.client();
  int chunks = 0;
  httplib::Request req = streaming_completion(
      "A story that goes on", 200, [&](const char*, size_t, uint64_t, uint64_t) {
        return ++chunks < 2;  // hang up after the first piece
      });
  client.send(req);
  EXPECT_GE(chunks, 1);
  EXPECT_TRUE(eventually(
      [&] { return replica.metric("requests_finished_total{finish_reason=\"cancelled\"}") == 1; }));
  EXPECT_TRUE(eventually([&] { return replica_idle(replica); }));
  EXPECT_TRUE(eventually([&] { return router.service().n_in_flight() == 0; }));
  EXPECT_EQ(router.service().in_flight_per_replica(), std::vector<int32_t>{0});
}

// A streaming client that leaves while its replica has said nothing yet (slow to its first byte,
// or stopped) frees its slot, its thread and both sockets at once; before, they stayed until the
// replica spoke or the upstream timeout ended.
TEST(Router, AStreamingClientThatLeavesWhileItsReplicaIsSilentIsLetGoAtOnce) {
  std::atomic<bool> release{false};
  std::atomic<int> generations{0};
  FakeReplica silent([&](const std::string& request) {
    if (request.rfind("GET /health", 0) == 0)
      return FakeReplica::head(200, "application/json") + R"({"status":"ok"})";
    ++generations;
    for (int i = 0; i < 500 && !release; ++i) std::this_thread::sleep_for(10ms);
    return FakeReplica::stream_head() + FakeReplica::chunk("data: [DONE]\n\n");
  });
  TestRouter router({silent.url()}, RoutingPolicy::CACHE_AWARE);
  json body = chat("Silence.", "anyone?");
  body["stream"] = true;
  {
    RawClient client(router.port());
    ASSERT_TRUE(client.send(post_request("/v1/chat/completions", body.dump())));
    ASSERT_TRUE(eventually([&] { return generations.load() == 1; }, 3000ms));
    ASSERT_EQ(router.service().n_in_flight(), 1);
  }  // the client closes its socket while the replica is silent
  EXPECT_TRUE(eventually([&] { return router.service().n_in_flight() == 0; }, 1500ms))
      << "the router still holds the departed client's request";
  release = true;
}

TEST(Router, SixtyFourStreamsWithAQuarterLeavingEarly) {
  Replica a, b;
  TestRouter router({replica_url(a), replica_url(b)}, RoutingPolicy::CACHE_AWARE);
  constexpr int kClients = 64;
  std::atomic<int> completed{0}, left{0}, failed{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      const bool leaves = i % 4 == 0;
      httplib::Client client = router.client();
      std::string received;
      httplib::Request req = streaming_completion(
          "Group " + std::to_string(i % 8) + " shares this opening line. Client " +
              std::to_string(i),
          leaves ? 200 : 12, [&](const char* data, size_t n, uint64_t, uint64_t) {
            received.append(data, n);
            return !leaves || received.find("\n\n") == std::string::npos;
          });
      httplib::Result r = client.send(req);
      if (leaves) {
        ++left;
      } else if (r && r->status == 200 && received.find("data: [DONE]") != std::string::npos &&
                 received.find("\"error\"") == std::string::npos) {
        ++completed;
      } else {
        ++failed;
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(completed.load(), kClients - kClients / 4);
  EXPECT_EQ(left.load(), kClients / 4);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_TRUE(eventually([&] { return replica_idle(a) && replica_idle(b); }));
  EXPECT_TRUE(eventually([&] { return router.service().n_in_flight() == 0; }));
  EXPECT_EQ(router.service().in_flight_per_replica(), (std::vector<int32_t>{0, 0}));
  EXPECT_GT(router.service().metrics().requests(0), 0u);
  EXPECT_GT(router.service().metrics().requests(1), 0u);
}

}  // namespace
}  // namespace trellis::testing
