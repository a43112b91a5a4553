#include "router/router_service.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "router/routing_text.h"
#include "server/api_error.h"
#include "server/auth.h"

namespace trellis {
namespace {

ApiResponse error_response(const ApiError& error) {
  return ApiResponse{error.http_status, "application/json", error_json(error).dump(), {}};
}

std::string sse_event(const nlohmann::json& value) {
  return "data: " + value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

// Answers a replica gives when another one may do better: overloaded, shutting down, failed.
bool worth_another_replica(int status) {
  return status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

bool is_event_stream(const UpstreamCall& call) {
  return call.status() == 200 && call.content_type().rfind("text/event-stream", 0) == 0;
}

std::optional<std::string> string_field(const nlohmann::json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

}  // namespace

// The outcome of sending a request to one replica: a response for the client, or a failure
// that another replica may not have.
struct RouterService::Attempt {
  std::optional<ApiResponse> response;
  std::string error;
};

// A request counted in flight on a replica; the count drops when the last holder lets go (the
// stream's writer holds it until the stream ends).
class RouterService::ReplicaSlot {
 public:
  ReplicaSlot(RouterService& service, int replica) : service_(service), replica_(replica) {}
  ~ReplicaSlot() {
    std::lock_guard<std::mutex> lock(service_.router_mutex_);
    service_.router_.finished(replica_);
  }
  ReplicaSlot(const ReplicaSlot&) = delete;
  ReplicaSlot& operator=(const ReplicaSlot&) = delete;

 private:
  RouterService& service_;
  int replica_;
};

std::span<const ApiEndpoint> RouterService::endpoints() {
  using E = RouterEndpoint;
  static constexpr ApiEndpoint kEndpoints[] = {
      {ApiMethod::GET, "/health", static_cast<int>(E::HEALTH), false, false, false},
      {ApiMethod::GET, "/metrics", static_cast<int>(E::METRICS), false, false, false},
      {ApiMethod::GET, "/v1/models", static_cast<int>(E::MODELS), true, true, false},
      {ApiMethod::POST, "/v1/completions", static_cast<int>(E::COMPLETIONS), true, true, true},
      {ApiMethod::POST, "/v1/chat/completions", static_cast<int>(E::CHAT), true, true, true},
      {ApiMethod::POST, "/tokenize", static_cast<int>(E::TOKENIZE), true, true, false},
      {ApiMethod::POST, "/detokenize", static_cast<int>(E::DETOKENIZE), true, true, false},
  };
  return kEndpoints;
}

RouterService::RouterService(RouterConfig config, ServerConfig server)
    : config_(std::move(config)),
      server_(std::move(server)),
      router_(config_.routing, static_cast<int>(config_.replicas.size())),
      metrics_(static_cast<int>(config_.replicas.size())) {
  for (const ReplicaAddress& address : config_.replicas) urls_.push_back(address.url());
  replica_models_.resize(config_.replicas.size());
  health_ = std::make_unique<HealthChecker>(
      config_.replicas, config_.health_interval,
      [this](int replica, bool healthy, const std::string& why) {
        set_health(replica, healthy, why);
      },
      config_.upstream_key,
      [this](int replica, std::vector<std::string> models) {
        std::lock_guard<std::mutex> lock(router_mutex_);
        replica_models_[static_cast<size_t>(replica)] = std::move(models);
      });
}

RouterService::~RouterService() {
  begin_shutdown();
  health_.reset();
}

ApiResponse RouterService::serve(const ApiEndpoint& endpoint, std::string_view body,
                                 std::string_view api_key,
                                 std::shared_ptr<ClientPresence> client) {
  switch (static_cast<RouterEndpoint>(endpoint.id)) {
    case RouterEndpoint::HEALTH:
      return health();
    case RouterEndpoint::METRICS:
      return render_metrics();
    case RouterEndpoint::COMPLETIONS:
    case RouterEndpoint::CHAT:
      return generate(endpoint, body, api_key, client);
    case RouterEndpoint::MODELS:
      if (std::optional<ApiResponse> listed = listed_models()) return std::move(*listed);
      return forward_plain(endpoint, body, client);
    case RouterEndpoint::TOKENIZE:
    case RouterEndpoint::DETOKENIZE:
      return forward_plain(endpoint, body, client);
  }
  return error_response(not_found_error("no such endpoint"));
}

void RouterService::begin_shutdown() {
  shutting_down_ = true;
  std::lock_guard<std::mutex> lock(calls_mutex_);
  for (const std::shared_ptr<UpstreamCall>& call : calls_) call->cancel();
}

std::vector<int32_t> RouterService::in_flight_per_replica() const {
  std::lock_guard<std::mutex> lock(router_mutex_);
  std::vector<int32_t> counts;
  for (const ReplicaState& r : router_.replicas()) counts.push_back(r.in_flight);
  return counts;
}

ApiResponse RouterService::health() const {
  int healthy = 0;
  {
    std::lock_guard<std::mutex> lock(router_mutex_);
    for (const ReplicaState& r : router_.replicas()) healthy += r.healthy ? 1 : 0;
  }
  nlohmann::json body = {{"status", healthy > 0 ? "ok" : "no healthy replica"},
                         {"healthy_replicas", healthy},
                         {"replicas", urls_.size()}};
  return ApiResponse{healthy > 0 ? 200 : 503, "application/json", body.dump(), {}};
}

ApiResponse RouterService::render_metrics() const {
  std::lock_guard<std::mutex> lock(router_mutex_);
  return ApiResponse{200, "text/plain; version=0.0.4", metrics_.render(router_.replicas(), urls_),
                     {}};
}

void RouterService::set_health(int replica, bool healthy, const std::string& why) {
  bool changed = false;
  {
    std::lock_guard<std::mutex> lock(router_mutex_);
    changed = router_.replicas()[static_cast<size_t>(replica)].healthy != healthy;
    router_.set_healthy(replica, healthy);
  }
  if (changed || !healthy) {
    std::fprintf(stderr, "router: replica %d (%s) is %s%s%s\n", replica,
                 urls_[static_cast<size_t>(replica)].c_str(), healthy ? "up" : "down",
                 healthy ? "" : ": ", healthy ? "" : why.c_str());
  }
}

void RouterService::replica_down(int replica, const std::string& why) {
  health_->report_down(replica);
  set_health(replica, false, why);
}

std::shared_ptr<UpstreamCall> RouterService::open_call(int replica) {
  auto call = std::make_shared<UpstreamCall>(config_.replicas[static_cast<size_t>(replica)],
                                             config_.timeouts);
  std::lock_guard<std::mutex> lock(calls_mutex_);
  if (shutting_down_) call->cancel();
  calls_.insert(call);
  return call;
}

void RouterService::close_call(const std::shared_ptr<UpstreamCall>& call) {
  std::lock_guard<std::mutex> lock(calls_mutex_);
  calls_.erase(call);
}

std::optional<ApiResponse> RouterService::listed_models() const {
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> lock(router_mutex_);
    for (const std::vector<std::string>& models : replica_models_)
      for (const std::string& id : models)
        if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  if (ids.empty()) return std::nullopt;
  nlohmann::json data = nlohmann::json::array();
  for (const std::string& id : ids)
    data.push_back({{"id", id}, {"object", "model"}, {"created", 0}, {"owned_by", "trellis"}});
  return ApiResponse{200, "application/json",
                     nlohmann::json{{"object", "list"}, {"data", data}}.dump(), {}};
}

ApiResult<std::vector<int>> RouterService::replicas_without(const std::string& model) const {
  std::vector<int> without;
  if (model.empty()) return without;
  std::lock_guard<std::mutex> lock(router_mutex_);
  std::string served;
  for (size_t i = 0; i < replica_models_.size(); ++i) {
    const std::vector<std::string>& models = replica_models_[i];
    if (models.empty() || std::find(models.begin(), models.end(), model) != models.end()) continue;
    without.push_back(static_cast<int>(i));
    for (const std::string& id : models) {
      if (served.find("`" + id + "`") == std::string::npos)
        served += (served.empty() ? "`" : ", `") + id + "`";
    }
  }
  if (without.size() < replica_models_.size()) return without;
  return not_found_error(
      "The model `" + model + "` is not served by any replica; they serve " + served,
      "model_not_found");
}

ApiResponse RouterService::forward_plain(const ApiEndpoint& endpoint, std::string_view body,
                                         const std::shared_ptr<ClientPresence>& client) {
  const UpstreamRequest request{endpoint.method == ApiMethod::GET ? "GET" : "POST",
                                std::string(endpoint.path), std::string(body),
                                config_.upstream_key};
  const nlohmann::json parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  const std::string model =
      parsed.is_object() ? string_field(parsed, "model").value_or("") : std::string();
  ApiResult<std::vector<int>> without = replicas_without(model);
  if (!without.ok()) return error_response(without.error());
  std::vector<int> tried = *without;
  std::string last_error = "no healthy replica";
  while (true) {
    int replica = -1;
    {
      std::lock_guard<std::mutex> lock(router_mutex_);
      replica = router_.least_loaded(tried);
    }
    if (replica < 0) break;
    tried.push_back(replica);
    Attempt attempt = try_replica(replica, request, false, client, nullptr);
    if (attempt.response) return std::move(*attempt.response);
    last_error = attempt.error;
  }
  return error_response(server_error("no replica could answer: " + last_error, 502));
}

ApiResponse RouterService::generate(const ApiEndpoint& endpoint, std::string_view body,
                                    std::string_view api_key,
                                    const std::shared_ptr<ClientPresence>& client) {
  if (shutting_down_) return error_response(server_error("the router is shutting down", 503));
  in_flight_.fetch_add(1);
  struct Count {
    std::atomic<int32_t>& n;
    ~Count() { n.fetch_sub(1); }
  } count{in_flight_};

  nlohmann::json request = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded())
    return error_response(invalid_request_error("the body is not valid JSON", std::nullopt));
  if (!request.is_object())
    return error_response(invalid_request_error("the body must be a JSON object", std::nullopt));
  const bool chat = static_cast<RouterEndpoint>(endpoint.id) == RouterEndpoint::CHAT;
  const std::string namespace_id = cache_namespace_for(server_.cache_isolation, api_key,
                                                       string_field(request, "cache_salt"));
  UpstreamRequest upstream{"POST", std::string(endpoint.path), std::string(body),
                           config_.upstream_key};
  if (server_.cache_isolation == CacheIsolation::KEY) {
    request["cache_salt"] = namespace_id;
    upstream.body = request.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  const auto stream_field = request.find("stream");
  const bool stream =
      stream_field != request.end() && stream_field->is_boolean() && stream_field->get<bool>();
  // Each model's prompts in a tree of their own: one model's cache says nothing of another's.
  const std::string model = string_field(request, "model").value_or("");
  const std::string key =
      routing_key(model.empty() ? namespace_id : namespace_id + '\x1f' + model,
                  chat ? chat_routing_text(request) : completion_routing_text(request));
  ApiResult<std::vector<int>> without = replicas_without(model);
  if (!without.ok()) return error_response(without.error());

  std::vector<int> tried;
  std::string last_error;
  while (!shutting_down_ && !(client && client->gone())) {
    RouteDecision decision;
    {
      std::vector<int> exclude = *without;
      exclude.insert(exclude.end(), tried.begin(), tried.end());
      std::lock_guard<std::mutex> lock(router_mutex_);
      decision = router_.route(key, exclude);
    }
    if (decision.replica < 0) break;
    metrics_.routed(decision.replica, decision.reason);
    if (!tried.empty()) metrics_.retried();
    tried.push_back(decision.replica);
    auto slot = std::make_shared<ReplicaSlot>(*this, decision.replica);
    Attempt attempt = try_replica(decision.replica, upstream, stream, client, std::move(slot));
    if (attempt.response) {
      if (server_.log_requests) {
        std::fprintf(stderr, "route %s -> replica %d (%s, %zu of %zu bytes matched) status=%d\n",
                     std::string(endpoint.path).c_str(), decision.replica,
                     std::string(route_reason_name(decision.reason)).c_str(),
                     decision.matched_bytes, key.size(), attempt.response->status);
      }
      return std::move(*attempt.response);
    }
    metrics_.upstream_error(decision.replica);
    last_error = attempt.error;
    if (server_.log_requests) {
      std::fprintf(stderr, "route %s -> replica %d failed: %s\n",
                   std::string(endpoint.path).c_str(), decision.replica, last_error.c_str());
    }
  }
  if (client && client->gone()) return error_response(server_error("the client left", 499));
  if (shutting_down_) return error_response(server_error("the router is shutting down", 503));
  if (tried.empty()) {
    metrics_.no_replica();
    return error_response(server_error("no healthy replica; retry later", 503));
  }
  return error_response(server_error(
      "every replica tried failed (" + std::to_string(tried.size()) + "); last: " + last_error,
      502));
}

RouterService::Attempt RouterService::try_replica(int replica, const UpstreamRequest& request,
                                                  bool stream,
                                                  const std::shared_ptr<ClientPresence>& client,
                                                  std::shared_ptr<ReplicaSlot> slot) {
  std::shared_ptr<UpstreamCall> call = open_call(replica);
  // Ends the call's registrations on every path out of here but a stream's, which keeps them
  // until the stream ends.
  struct Registration {
    RouterService& service;
    std::shared_ptr<UpstreamCall> call;
    std::shared_ptr<ClientPresence> client;
    ~Registration() {
      if (client) client->clear();
      service.close_call(call);
    }
  };
  auto registration = std::make_shared<Registration>(Registration{*this, call, client});
  if (client) client->on_leave([call] { call->cancel(); }, stream);

  if (Status started = call->start(request); !started.ok()) {
    if (!call->cancelled()) replica_down(replica, started.error().message);
    return Attempt{std::nullopt, started.error().message};
  }
  const int status = call->status();
  if (!is_event_stream(*call)) {
    Result<std::string> body = call->read_rest();
    if (!body.ok()) return Attempt{std::nullopt, body.error().message};
    if (worth_another_replica(status)) {
      return Attempt{std::nullopt, "replica answered " + std::to_string(status) + ": " + *body};
    }
    return Attempt{ApiResponse{status, call->content_type(), std::move(*body), {}}, ""};
  }
  // Nothing has reached the client yet: wait for a whole first event, so that a replica that
  // fails before it can still be replaced by another.
  std::string pending;
  while (pending.find("\n\n") == std::string::npos) {
    Result<bool> more = call->read_some(pending);
    if (!more.ok()) return Attempt{std::nullopt, more.error().message};
    if (!*more) break;
  }
  ApiResponse response;
  response.content_type = "text/event-stream";
  response.stream = [this, call, registration, slot, pending = std::move(pending)](
                        const StreamWriter& write) mutable {
    pass_stream(*call, std::move(pending), write, metrics_);
  };
  return Attempt{std::move(response), ""};
}

void RouterService::pass_stream(UpstreamCall& call, std::string pending, const StreamWriter& write,
                                RouterMetrics& metrics) {
  while (true) {
    // Whole events only, so that an error event never lands inside a broken one.
    const size_t end = pending.rfind("\n\n");
    if (end != std::string::npos) {
      if (!write(std::string_view(pending).substr(0, end + 2))) {
        call.cancel();  // the client left: the replica cancels the request
        return;
      }
      pending.erase(0, end + 2);
    }
    Result<bool> more = call.read_some(pending);
    if (!more.ok()) {
      if (!call.cancelled()) metrics.stream_broken();
      const ApiError error = server_error(
          call.cancelled() ? "the request was cancelled"
                           : "the replica failed during the stream: " + more.error().message,
          call.cancelled() ? 503 : 502);
      write(sse_event(error_json(error)) + "data: [DONE]\n\n");
      return;
    }
    if (!*more) {
      if (!pending.empty()) write(pending);
      return;
    }
  }
}

}  // namespace trellis
