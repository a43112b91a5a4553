// The router's API, served by the same HTTP transport as `trellis serve` (server/http_server.h):
// an OpenAI-compatible front that forwards each request to one replica.
//
//   POST /v1/completions, /v1/chat/completions   routed by policy (router/routing_policy.h) on
//                                                the request's namespace and prompt text
//   POST /tokenize, /detokenize                   the least loaded healthy replica
//   GET  /v1/models  the models the replicas list (each replica's GET /v1/models, asked with its
//                    health checks), else the least loaded healthy replica's answer
//
// Replicas of several models (`trellis serve --models-dir`): a request goes only to replicas that
// list its "model" (a replica whose list is not known yet may get any); a model no replica lists
// gets 404 naming the ones they do. Cache-aware routing keeps each model's prompts apart.
//   GET  /health   200 while a replica is healthy, else 503
//   GET  /metrics  trellis_router:* (router/router_metrics.h)
//
// Failures: a request that fails before its first byte reached the client (no connection, a
// 429/5xx answer, a response that broke off) is sent to another replica, until every healthy
// one was tried (then 502); a replica that cannot be reached is taken out of rotation until the
// health checks find it again. A stream whose replica fails after its first byte ends with an
// error event and [DONE]. A client that leaves closes the upstream connection, so the replica
// cancels the request and frees its blocks.
//
// Keys: the transport checks the client's key (ServerConfig::api_keys); replicas get
// RouterConfig::upstream_key or none. With CacheIsolation::KEY the request's namespace (a digest
// of the client's key, then its cache_salt) is sent as the cache_salt, so that replicas keep the
// clients' caches apart even though they all see one key.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "router/health_checker.h"
#include "router/router_metrics.h"
#include "router/routing_policy.h"
#include "router/upstream_call.h"
#include "server/api_error.h"
#include "server/http_api.h"
#include "server/server_config.h"

namespace trellis {

struct RouterConfig {
  std::vector<ReplicaAddress> replicas;
  RoutingConfig routing;
  std::string upstream_key;  // sent to replicas as a bearer token; empty: none
  UpstreamTimeouts timeouts;
  std::chrono::milliseconds health_interval{2000};
};

enum class RouterEndpoint { HEALTH, METRICS, MODELS, COMPLETIONS, CHAT, TOKENIZE, DETOKENIZE };

class RouterService : public HttpApi {
 public:
  // `server`: the front's own settings (keys, isolation, request log). Starts the health checks.
  RouterService(RouterConfig config, ServerConfig server);
  ~RouterService() override;

  static std::span<const ApiEndpoint> endpoints();

  ApiResponse serve(const ApiEndpoint& endpoint, std::string_view body, std::string_view api_key,
                    std::shared_ptr<ClientPresence> client) override;
  int32_t n_in_flight() const override { return in_flight_.load(); }
  void begin_shutdown() override;

  // Checks every replica now (the health thread does so every health_interval).
  void check_health() { health_->check_all(); }
  const RouterMetrics& metrics() const { return metrics_; }
  // Requests in flight on each replica, as the router counts them.
  std::vector<int32_t> in_flight_per_replica() const;

 private:
  struct Attempt;
  class ReplicaSlot;

  ApiResponse health() const;
  ApiResponse render_metrics() const;
  ApiResponse generate(const ApiEndpoint& endpoint, std::string_view body,
                       std::string_view api_key, const std::shared_ptr<ClientPresence>& client);
  // /v1/models, /tokenize, /detokenize: no routing state.
  ApiResponse forward_plain(const ApiEndpoint& endpoint, std::string_view body,
                            const std::shared_ptr<ClientPresence>& client);
  // The union of the replicas' model lists, as a /v1/models answer (nullopt: none known).
  std::optional<ApiResponse> listed_models() const;
  // The replicas known not to serve `model` (none for an empty one), or a 404 when that is every
  // replica.
  ApiResult<std::vector<int>> replicas_without(const std::string& model) const;
  Attempt try_replica(int replica, const UpstreamRequest& request, bool stream,
                      const std::shared_ptr<ClientPresence>& client,
                      std::shared_ptr<ReplicaSlot> slot);
  static void pass_stream(UpstreamCall& call, std::string pending, const StreamWriter& write,
                          RouterMetrics& metrics);
  void replica_down(int replica, const std::string& why);
  void set_health(int replica, bool healthy, const std::string& why);
  std::shared_ptr<UpstreamCall> open_call(int replica);
  void close_call(const std::shared_ptr<UpstreamCall>& call);

  const RouterConfig config_;
  const ServerConfig server_;
  std::vector<std::string> urls_;
  mutable std::mutex router_mutex_;
  Router router_;  // guarded by router_mutex_
  // Each replica's models from its last /v1/models (empty: not known); guarded by router_mutex_.
  std::vector<std::vector<std::string>> replica_models_;
  RouterMetrics metrics_;
  std::atomic<int32_t> in_flight_{0};
  std::atomic<bool> shutting_down_{false};
  std::mutex calls_mutex_;
  std::unordered_set<std::shared_ptr<UpstreamCall>> calls_;  // open, for shutdown to cancel
  std::unique_ptr<HealthChecker> health_;                    // last: its thread reads the rest
};

}  // namespace trellis
