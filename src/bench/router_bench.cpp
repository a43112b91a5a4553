#include "bench/router_bench.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>

#include "bench/bench_server.h"
#include "bench/bench_tokens.h"
#include "bench/http_load_client.h"
#include "bench/results.h"
#include "bench/stats.h"
#include "router/router_service.h"
#include "server/http_server.h"

namespace trellis::bench {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// bench_tokens seeds: group g's system prompt (+ g), session s's turn t (+ a running index), and
// the warm-up's texts.
constexpr uint32_t kSystemSeed = 300;
constexpr uint32_t kUserSeed = 5000;
constexpr uint32_t kWarmUpSeed = 77;

// The router over `replicas` on a free loopback port.
class BenchRouter {
 public:
  BenchRouter(const std::vector<std::unique_ptr<BenchServer>>& replicas, RoutingPolicy policy) {
    RouterConfig config;
    for (const auto& r : replicas) config.replicas.push_back({"127.0.0.1", r->port()});
    config.routing.policy = policy;
    ServerConfig front;
    front.port = 0;
    front.log_requests = false;
    service_ = std::make_unique<RouterService>(config, front);
    service_->check_health();
    server_ = std::make_unique<HttpServer>(front, RouterService::endpoints());
    bound_ = server_->bind();
    thread_ = std::thread([this] { server_->serve(); });
    server_->set_api(*service_);
  }
  ~BenchRouter() {
    server_->shutdown();
    thread_.join();
  }
  const Status& bound() const { return bound_; }
  int port() const { return server_->port(); }
  const RouterMetrics& metrics() const { return service_->metrics(); }

 private:
  std::unique_ptr<RouterService> service_;
  std::unique_ptr<HttpServer> server_;
  Status bound_;
  std::thread thread_;
};

struct Turn {
  int32_t group = 0;
  ChatFigures figures;
};

// Every session at once, each its turns one after another, against `port`.
Result<std::vector<Turn>> run_sessions(const RouterBenchOptions& o, const Tokenizer& tokenizer,
                                       int port, const std::string& label,
                                       const Observer& observer) {
  const int32_t n_sessions = o.groups * o.sessions;
  std::vector<Turn> turns(static_cast<size_t>(n_sessions * o.turns));
  std::vector<std::string> systems;
  for (int32_t g = 0; g < o.groups; ++g)
    systems.push_back(bench_text(tokenizer, o.system_len, kSystemSeed + static_cast<uint32_t>(g)));
  std::mutex mutex;  // guards failed, done and the observer
  Status failed;
  uint64_t done = 0;
  observer.report_progress(label, 0, turns.size());
  std::vector<std::thread> clients;
  for (int32_t s = 0; s < n_sessions; ++s) {
    clients.emplace_back([&, s] {
      const int32_t group = s % o.groups;  // groups interleave in arrival order
      json messages = json::array({{{"role", "system"}, {"content", systems[size_t(group)]}}});
      for (int32_t t = 0; t < o.turns; ++t) {
        const auto seed = kUserSeed + static_cast<uint32_t>(s * o.turns + t);
        messages.push_back(
            {{"role", "user"}, {"content", bench_text(tokenizer, o.user_len, seed)}});
        Result<ChatFigures> r = chat_request(port, conversation_body(messages, o.decode_len));
        std::lock_guard<std::mutex> lock(mutex);
        if (!r.ok()) {
          failed = r.error();
          return;
        }
        messages.push_back({{"role", "assistant"}, {"content", r->text}});
        turns[static_cast<size_t>(s * o.turns + t)] = Turn{group, std::move(r).value()};
        observer.report_progress(label, ++done, turns.size());
      }
    });
  }
  for (std::thread& c : clients) c.join();
  if (!failed.ok()) return failed.error();
  return turns;
}

json run_row(const std::string& label, int32_t n_replicas, const std::vector<Turn>& turns,
             double wall_ms, const std::vector<uint64_t>& per_replica, int32_t groups) {
  std::vector<double> ttft, latency;
  std::vector<std::vector<double>> group_latency(static_cast<size_t>(groups));
  int64_t prompt = 0, cached = 0, generated = 0;
  for (const Turn& t : turns) {
    ttft.push_back(t.figures.ttft_ms);
    latency.push_back(t.figures.latency_ms);
    group_latency[static_cast<size_t>(t.group)].push_back(t.figures.latency_ms);
    prompt += t.figures.prompt_tokens;
    cached += t.figures.cached_tokens;
    generated += t.figures.completion_tokens;
  }
  std::vector<double> group_p99;
  for (const std::vector<double>& g : group_latency)
    group_p99.push_back(g.empty() ? 0 : percentile(g, 0.99));
  const double worst_p99 = *std::max_element(group_p99.begin(), group_p99.end());
  const double seconds = wall_ms / 1000.0;
  return {{"run", label},
          {"replicas", n_replicas},
          {"requests", turns.size()},
          {"requests_per_s", static_cast<double>(turns.size()) / seconds},
          {"generation_tokens_per_s", static_cast<double>(generated) / seconds},
          {"prompt_tokens", prompt},
          {"cached_tokens", cached},
          {"hit_rate", prompt > 0 ? static_cast<double>(cached) / static_cast<double>(prompt) : 0},
          {"ttft_ms_p50", percentile(ttft, 0.5)},
          {"latency_ms_p50", percentile(latency, 0.5)},
          {"worst_group_latency_ms_p99", worst_p99},
          {"group_latency_ms_p99", group_p99},
          {"requests_per_replica", per_replica},
          {"wall_ms", wall_ms}};
}

// One run: fresh replicas, warmed up (weights paged in, nothing cached that the workload
// shares), then the sessions through the router (policy) or straight to the one replica.
Result<json> run_one(const RouterBenchOptions& o, const std::string& label, int32_t n_replicas,
                     const EngineConfig& engine_config, std::optional<RoutingPolicy> policy,
                     const Observer& observer) {
  std::vector<std::unique_ptr<BenchServer>> replicas;
  for (int32_t i = 0; i < n_replicas; ++i) {
    Result<std::unique_ptr<BenchServer>> r =
        BenchServer::start(o.model_path, engine_config, o.chat_template);
    if (!r.ok()) return r.error();
    replicas.push_back(std::move(r).value());
  }
  const Tokenizer& tokenizer = replicas.front()->tokenizer();
  for (const auto& r : replicas) {
    Result<ChatFigures> warm =
        chat_request(r->port(), chat_body(bench_text(tokenizer, 16, kWarmUpSeed), "warm up", 2));
    if (!warm.ok()) return warm.error();
  }
  std::unique_ptr<BenchRouter> router;
  if (policy) {
    router = std::make_unique<BenchRouter>(replicas, *policy);
    TRELLIS_TRY(router->bound());
  }
  const int port = router ? router->port() : replicas.front()->port();
  const Clock::time_point start = Clock::now();
  Result<std::vector<Turn>> turns = run_sessions(o, tokenizer, port, label, observer);
  if (!turns.ok()) return turns.error();
  const double wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  std::vector<uint64_t> per_replica;
  for (int32_t i = 0; i < n_replicas; ++i)
    per_replica.push_back(router ? router->metrics().requests(i) : turns->size());
  return run_row(label, n_replicas, *turns, wall_ms, per_replica, o.groups);
}

}  // namespace

Result<json> run_router_bench(const RouterBenchOptions& o, const Observer& observer) {
  if (o.replicas < 1 || o.groups < 1 || o.sessions < 1 || o.turns < 1 || o.system_len < 1 ||
      o.user_len < 1 || o.decode_len < 1) {
    return Error{
        "--replicas, --groups, --sessions, --turns, --system-len, --user-len and -D "
        "must be positive"};
  }
  std::vector<RoutingPolicy> policies;
  for (const std::string& name : o.policies) {
    std::optional<RoutingPolicy> p = parse_routing_policy(name);
    if (!p) return Error{"unknown policy '" + name + "' (cache-aware, round-robin, least-load)"};
    policies.push_back(*p);
  }
  json rows = json::array();
  for (size_t i = 0; i < policies.size(); ++i) {
    Result<json> row = run_one(o, o.policies[i], o.replicas, o.engine, policies[i], observer);
    if (!row.ok()) return row.error();
    rows.push_back(*row);
    observer.report_row(rows.back());
  }
  if (o.single) {
    EngineConfig single = o.engine;  // the same total KV memory in one replica
    single.kv_bytes *= o.replicas;
    single.kv_tokens *= o.replicas;
    Result<json> row = run_one(o, "single", 1, single, std::nullopt, observer);
    if (!row.ok()) return row.error();
    rows.push_back(*row);
    observer.report_row(rows.back());
  }
  json record = {{"bench", "router"},
                 {"replicas", o.replicas},
                 {"threads_per_replica", o.engine.n_threads},
                 {"groups", o.groups},
                 {"sessions_per_group", o.sessions},
                 {"turns", o.turns},
                 {"system_len", o.system_len},
                 {"user_len", o.user_len},
                 {"D", o.decode_len},
                 {"kv_tokens_per_replica", o.engine.kv_tokens},
                 {"kv_bytes_per_replica", o.engine.kv_bytes},
                 {"runs", rows}};
  record.update(run_facts(o.model_path));
  return record;
}

CsvTable router_results_table(const json& record) {
  return csv_table(record["runs"],
                   {"run", "replicas", "requests", "requests_per_s", "generation_tokens_per_s",
                    "prompt_tokens", "cached_tokens", "hit_rate", "ttft_ms_p50", "latency_ms_p50",
                    "worst_group_latency_ms_p99", "wall_ms"});
}

}  // namespace trellis::bench
