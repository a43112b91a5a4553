// The hub over several models (server/model_hub.h) with stand-in APIs: routing by the body's
// model, loading on first use, least-recently-used unloading within the count and memory budgets,
// never unloading a held model, failures and waits that stay with their own model's requests.
#include "server/model_hub.h"

#include "server/embedding_service.h"
#include "server/openai_service.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

namespace trellis {
namespace {

using nlohmann::json;

const ApiEndpoint kFakeGeneration[] = {
    {ApiMethod::GET, "/metrics", 1, false, false, false},
    {ApiMethod::POST, "/v1/completions", 2, true, true, true},
    {ApiMethod::POST, "/tokenize", 3, true, true, false},
};

// Answers with its name and the route; a body asking for "stream" gets a stream response.
class FakeApi : public HttpApi {
 public:
  FakeApi(std::string name, std::atomic<int>& alive) : name_(std::move(name)), alive_(alive) {
    ++alive_;
  }
  ~FakeApi() override { --alive_; }
  ApiResponse serve(const ApiEndpoint& endpoint, std::string_view body, std::string_view,
                    std::shared_ptr<ClientPresence>) override {
    if (endpoint.id == 1) {
      return {200, "text/plain",
              "# HELP trellis:requests_total Requests\n# TYPE trellis:requests_total counter\n"
              "trellis:requests_total 3\n",
              {}};
    }
    ApiResponse response{200, "application/json",
                         json{{"model", name_}, {"path", endpoint.path}}.dump(), {}};
    if (body.find("stream") != std::string_view::npos)
      response.stream = [](const StreamWriter& write) { write("data: [DONE]\n\n"); };
    return response;
  }
  int32_t n_in_flight() const override { return 0; }
  void begin_shutdown() override {}

 private:
  std::string name_;
  std::atomic<int>& alive_;
};

// A loader of fake models: counts loads, can fail a name, can hold a name's load until let go.
struct FakeLoader {
  std::atomic<int> alive{0};
  std::atomic<int> n_calls{0};
  std::string failing;     // this name fails to load
  std::string held;        // this name's load waits for let_go()
  std::mutex mutex;
  std::condition_variable cv;
  bool released = false;
  std::atomic<bool> holding{false};

  void let_go() {
    std::lock_guard<std::mutex> lock(mutex);
    released = true;
    cv.notify_all();
  }

  ModelLoader loader() {
    return [this](const HubModel& model) -> Result<ServedModel> {
      ++n_calls;
      if (model.name == failing) return Error{"not a GGUF file"};
      if (model.name == held) {
        holding = true;
        std::unique_lock<std::mutex> lock(mutex);
        cv.wait(lock, [this] { return released; });
      }
      ServedModel loaded;
      loaded.api = std::make_unique<FakeApi>(model.name, alive);
      loaded.endpoints = kFakeGeneration;
      loaded.memory_bytes = model.expected_bytes;
      loaded.kind = "generation";
      return loaded;
    };
  }
};

const ApiEndpoint& route(std::string_view path) {
  for (const ApiEndpoint& endpoint : ModelHub::endpoints())
    if (endpoint.path == path) return endpoint;
  throw std::logic_error("no such route");
}

ApiResponse call(ModelHub& hub, const std::string& model,
                 std::string_view which = "/v1/completions", const std::string& extra = "") {
  json body = {{"prompt", "hi"}};
  if (!model.empty()) body["model"] = model;
  if (!extra.empty()) body[extra] = true;
  return hub.serve(route(which), body.dump(), "", nullptr);
}

std::string served_by(const ApiResponse& response) {
  return json::parse(response.body).value("model", "");
}

HubOptions limits(int32_t max_loaded, int64_t max_memory = 0,
                  std::chrono::milliseconds wait = std::chrono::minutes(5)) {
  HubOptions options;
  options.max_loaded = max_loaded;
  options.max_memory_bytes = max_memory;
  options.load_wait = wait;
  return options;
}

std::vector<HubModel> models(std::initializer_list<std::pair<const char*, int64_t>> list) {
  std::vector<HubModel> out;
  for (const auto& [name, bytes] : list) out.push_back({name, std::string(name) + ".gguf", bytes, "generation"});
  return out;
}

TEST(ModelHub, RoutesByTheBodysModelAndLoadsOnFirstUse) {
  FakeLoader fake;
  ModelHub hub(models({{"alpha", 1}, {"beta", 1}}), fake.loader(), {});
  EXPECT_EQ(fake.n_calls, 0);
  ApiResponse a = call(hub, "alpha");
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(served_by(a), "alpha");
  EXPECT_EQ(served_by(call(hub, "beta")), "beta");
  EXPECT_EQ(served_by(call(hub, "alpha", "/tokenize")), "alpha");
  EXPECT_EQ(fake.n_calls, 2);  // each loaded once
  const json listed = json::parse(call(hub, "", "/v1/models").body);
  ASSERT_EQ(listed["data"].size(), 2u);
  EXPECT_EQ(listed["data"][0]["id"], "alpha");
  EXPECT_EQ(listed["data"][0]["loaded"], true);
}

TEST(ModelHub, UnknownOrMissingModelsAreRefusedNamingTheModels) {
  FakeLoader fake;
  ModelHub hub(models({{"alpha", 1}, {"beta", 1}}), fake.loader(), {});
  ApiResponse unknown = call(hub, "gamma");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(unknown.body.find("`gamma` does not exist"), std::string::npos) << unknown.body;
  EXPECT_NE(unknown.body.find("`alpha`, `beta`"), std::string::npos) << unknown.body;
  EXPECT_NE(unknown.body.find("model_not_found"), std::string::npos);
  ApiResponse missing = call(hub, "");
  EXPECT_EQ(missing.status, 400);
  EXPECT_NE(missing.body.find("model is required"), std::string::npos) << missing.body;
  ApiResponse not_string = hub.serve(route("/v1/completions"), R"({"model":3})", "", nullptr);
  EXPECT_EQ(not_string.status, 400);
  ApiResponse malformed = hub.serve(route("/v1/completions"), "{", "", nullptr);
  EXPECT_EQ(malformed.status, 400);
  EXPECT_EQ(fake.n_calls, 0);

  FakeLoader single;
  ModelHub one(models({{"alpha", 1}}), single.loader(), {});
  EXPECT_EQ(served_by(call(one, "")), "alpha");  // the only model needs no name
}

TEST(ModelHub, UnloadsTheLeastRecentlyUsedBeyondTheCount) {
  FakeLoader fake;
  std::vector<std::string> unloaded;
  HubOptions options = limits(2);
  options.on_unload = [&unloaded](const HubModel& model, const char*) {
    unloaded.push_back(model.name);
  };
  ModelHub hub(models({{"a", 1}, {"b", 1}, {"c", 1}}), fake.loader(), options);
  call(hub, "a");
  call(hub, "b");
  call(hub, "a");  // b is now the least recently used
  call(hub, "c");
  EXPECT_EQ(hub.loaded_models(), (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(hub.n_unloads(), 1);
  EXPECT_EQ(unloaded, (std::vector<std::string>{"b"}));
  EXPECT_EQ(fake.alive, 2);  // b's API was destroyed
  EXPECT_EQ(served_by(call(hub, "b")), "b");
  EXPECT_EQ(hub.loaded_models(), (std::vector<std::string>{"c", "b"}));
  EXPECT_EQ(fake.n_calls, 4);
}

TEST(ModelHub, UnloadsWithinTheMemoryBudget) {
  FakeLoader fake;
  ModelHub hub(models({{"big", 60}, {"mid", 50}, {"small", 30}, {"huge", 200}}), fake.loader(),
               limits(0, 100));
  call(hub, "big");
  call(hub, "mid");  // 110 > 100: big goes
  EXPECT_EQ(hub.loaded_models(), (std::vector<std::string>{"mid"}));
  call(hub, "small");  // 80: both stay
  EXPECT_EQ(hub.loaded_models(), (std::vector<std::string>{"mid", "small"}));
  ApiResponse huge = call(hub, "huge");
  EXPECT_EQ(huge.status, 503);
  EXPECT_NE(huge.body.find("more than the server's model memory"), std::string::npos) << huge.body;
  EXPECT_EQ(hub.loaded_models(), (std::vector<std::string>{"mid", "small"}));
}

TEST(ModelHub, AHeldModelIsNeverUnloaded) {
  FakeLoader fake;
  ModelHub hub(models({{"a", 1}, {"b", 1}}), fake.loader(),
               limits(1, 0, std::chrono::milliseconds(200)));
  ApiResponse stream = call(hub, "a", "/v1/completions", "stream");
  ASSERT_TRUE(stream.stream);  // not yet run: the stream holds a
  EXPECT_EQ(hub.n_in_flight(), 1);
  ApiResponse waited = call(hub, "b");
  EXPECT_EQ(waited.status, 503) << waited.body;
  EXPECT_NE(waited.body.find("still loading"), std::string::npos) << waited.body;
  EXPECT_EQ(hub.loaded_models(), (std::vector<std::string>{"a"}));
  std::string events;
  stream.stream([&events](std::string_view data) {
    events += data;
    return true;
  });
  EXPECT_EQ(events, "data: [DONE]\n\n");
  EXPECT_EQ(hub.loaded_models(), (std::vector<std::string>{"a"}));  // the stream object lives
  stream = ApiResponse{};
  EXPECT_EQ(hub.n_in_flight(), 0);
  EXPECT_EQ(served_by(call(hub, "b")), "b");
  EXPECT_EQ(hub.loaded_models(), (std::vector<std::string>{"b"}));
}

TEST(ModelHub, AWaitingLoadProceedsWhenTheHolderLetsGo) {
  FakeLoader fake;
  ModelHub hub(models({{"a", 1}, {"b", 1}}), fake.loader(), limits(1));
  auto stream = std::make_unique<ApiResponse>(call(hub, "a", "/v1/completions", "stream"));
  std::future<ApiResponse> b = std::async(std::launch::async, [&hub] { return call(hub, "b"); });
  EXPECT_EQ(b.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  stream.reset();
  EXPECT_EQ(served_by(b.get()), "b");
}

TEST(ModelHub, ALoadingModelDoesNotHoldUpOthers) {
  FakeLoader fake;
  fake.held = "slow";
  ModelHub hub(models({{"fast", 1}, {"slow", 1}}), fake.loader(), {});
  call(hub, "fast");
  std::future<ApiResponse> slow =
      std::async(std::launch::async, [&hub] { return call(hub, "slow"); });
  while (!fake.holding) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(served_by(call(hub, "fast")), "fast");  // while slow is loading
  EXPECT_EQ(slow.wait_for(std::chrono::milliseconds(20)), std::future_status::timeout);
  fake.let_go();
  EXPECT_EQ(served_by(slow.get()), "slow");
}

TEST(ModelHub, ALoadThatOutlastsTheWaitIs503) {
  FakeLoader fake;
  fake.held = "slow";
  ModelHub hub(models({{"slow", 1}}), fake.loader(), limits(0, 0, std::chrono::milliseconds(50)));
  ApiResponse waited = call(hub, "slow");
  EXPECT_EQ(waited.status, 503);
  EXPECT_NE(waited.body.find("still loading"), std::string::npos) << waited.body;
  fake.let_go();
  // The load went on: the next request gets the model.
  ApiResponse later{0, "", "", {}};
  for (int i = 0; i < 200 && later.status != 200; ++i) later = call(hub, "slow");
  EXPECT_EQ(served_by(later), "slow");
}

TEST(ModelHub, AFailedLoadIsAnErrorForItsRequestsOnly) {
  FakeLoader fake;
  fake.failing = "broken";
  ModelHub hub(models({{"good", 1}, {"broken", 1}}), fake.loader(), {});
  ApiResponse broken = call(hub, "broken");
  EXPECT_EQ(broken.status, 500);
  EXPECT_NE(broken.body.find("`broken` failed to load: not a GGUF file"), std::string::npos)
      << broken.body;
  EXPECT_EQ(served_by(call(hub, "good")), "good");
  EXPECT_EQ(call(hub, "broken").status, 500);
  EXPECT_EQ(fake.n_calls, 3);  // each request for the broken file tried it again
}

TEST(ModelHub, ServesEveryRouteOfBothServicesOnce) {
  std::set<std::string> paths;
  for (const ApiEndpoint& endpoint : ModelHub::endpoints()) {
    EXPECT_TRUE(paths.insert(std::string(endpoint.path)).second) << endpoint.path;
    EXPECT_EQ(&ModelHub::endpoints()[static_cast<size_t>(endpoint.id)], &endpoint);
  }
  for (const auto& routes : {OpenAiService::endpoints(), EmbeddingService::endpoints()})
    for (const ApiEndpoint& endpoint : routes) EXPECT_TRUE(paths.contains(std::string(endpoint.path)));
}

TEST(ModelHub, ARouteTheModelLacksIsRefused) {
  FakeLoader fake;
  ModelHub hub(models({{"gen", 1}}), fake.loader(), {});
  ApiResponse refused = call(hub, "gen", "/v1/embeddings");
  EXPECT_EQ(refused.status, 400);
  EXPECT_NE(refused.body.find("does not serve /v1/embeddings"), std::string::npos) << refused.body;
}

TEST(ModelHub, MetricsCarryTheModelLabel) {
  FakeLoader fake;
  ModelHub hub(models({{"a", 10}, {"b", 20}, {"c", 1}}), fake.loader(), {});
  call(hub, "a");
  call(hub, "b");
  const std::string text = call(hub, "", "/metrics").body;
  EXPECT_NE(text.find("trellis:models 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("trellis:models_loaded 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("trellis:model_memory_bytes{model=\"b\"} 20\n"), std::string::npos) << text;
  EXPECT_NE(text.find("trellis:requests_total{model=\"a\"} 3\ntrellis:requests_total{model=\"b\"} 3\n"),
            std::string::npos)
      << text;
  size_t n_help = 0;
  for (size_t at = text.find("# HELP trellis:requests_total"); at != std::string::npos;
       at = text.find("# HELP trellis:requests_total", at + 1))
    ++n_help;
  EXPECT_EQ(n_help, 1u);
}

TEST(ModelHub, AModelIdleForTheKeepAliveIsUnloaded) {
  FakeLoader fake;
  std::vector<std::string> why;
  HubOptions options = limits(0);
  options.keep_alive = std::chrono::milliseconds(30);
  options.on_unload = [&why](const HubModel&, const char* reason) { why.emplace_back(reason); };
  ModelHub hub(models({{"a", 1}, {"b", 1}}), fake.loader(), options);
  call(hub, "a");
  ApiResponse held = call(hub, "b", "/v1/completions", "stream");
  for (int i = 0; i < 500 && !hub.loaded_models().empty() && hub.loaded_models().front() == "a";
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(hub.loaded_models(), (std::vector<std::string>{"b"}));  // b is held
  EXPECT_EQ(why, (std::vector<std::string>{"idle"}));
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  EXPECT_EQ(hub.loaded_models(), (std::vector<std::string>{"b"}));
  held = ApiResponse{};  // released: idle from now
  for (int i = 0; i < 500 && !hub.loaded_models().empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_TRUE(hub.loaded_models().empty());
  EXPECT_EQ(hub.n_unloads(), 2);
  EXPECT_EQ(served_by(call(hub, "a")), "a");  // loads again on use
}

TEST(ModelHub, ShutdownRefusesNewRequests) {
  FakeLoader fake;
  ModelHub hub(models({{"a", 1}}), fake.loader(), {});
  call(hub, "a");
  hub.begin_shutdown();
  EXPECT_EQ(call(hub, "a").status, 503);
  EXPECT_EQ(call(hub, "", "/health").status, 503);
}

}  // namespace
}  // namespace trellis
