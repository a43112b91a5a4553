#include "router/health_checker.h"

#include <nlohmann/json.hpp>

namespace trellis {
namespace {

// A health check is small and local: a replica slower than this to answer it counts as down.
constexpr UpstreamTimeouts kHealthTimeouts{std::chrono::milliseconds(1000),
                                           std::chrono::milliseconds(2000)};

}  // namespace

bool replica_healthy(const ReplicaAddress& address, const UpstreamTimeouts& timeouts,
                     std::string* why) {
  UpstreamCall call(address, timeouts);
  const Status started = call.start(UpstreamRequest{"GET", "/health", "", ""});
  if (!started.ok()) {
    if (why) *why = started.error().message;
    return false;
  }
  Result<std::string> body = call.read_rest();
  if (why) {
    *why = body.ok() ? "GET /health answered " + std::to_string(call.status()) + " " + *body
                     : body.error().message;
  }
  return body.ok() && call.status() == 200;
}

Result<std::vector<std::string>> replica_models(const ReplicaAddress& address,
                                                const UpstreamTimeouts& timeouts,
                                                const std::string& api_key) {
  UpstreamCall call(address, timeouts);
  TRELLIS_TRY(call.start(UpstreamRequest{"GET", "/v1/models", "", api_key}));
  Result<std::string> body = call.read_rest();
  if (!body.ok()) return body.error();
  if (call.status() != 200)
    return Error{"GET /v1/models answered " + std::to_string(call.status())};
  const nlohmann::json list = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
  std::vector<std::string> ids;
  if (!list.is_object() || !list.contains("data") || !list["data"].is_array())
    return Error{"GET /v1/models answered no model list"};
  for (const nlohmann::json& model : list["data"])
    if (model.is_object() && model.contains("id") && model["id"].is_string())
      ids.push_back(model["id"].get<std::string>());
  return ids;
}

HealthChecker::HealthChecker(std::vector<ReplicaAddress> replicas,
                             std::chrono::milliseconds interval, OnChange on_change,
                             std::string api_key, OnModels on_models)
    : replicas_(std::move(replicas)),
      interval_(interval),
      on_change_(std::move(on_change)),
      api_key_(std::move(api_key)),
      on_models_(std::move(on_models)),
      last_(replicas_.size(), -1) {
  // The thread starts last: every member it reads is initialized.
  thread_ = std::thread([this] { run(); });
}

HealthChecker::~HealthChecker() {
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    stopping_ = true;
  }
  stop_signal_.notify_all();
  thread_.join();
}

void HealthChecker::check_all() {
  std::lock_guard<std::mutex> lock(check_mutex_);
  for (size_t i = 0; i < replicas_.size(); ++i) {
    std::string why;
    const int healthy = replica_healthy(replicas_[i], kHealthTimeouts, &why) ? 1 : 0;
    if (healthy == 1 && on_models_) {
      Result<std::vector<std::string>> models =
          replica_models(replicas_[i], kHealthTimeouts, api_key_);
      if (models.ok()) on_models_(static_cast<int>(i), std::move(*models));
    }
    {
      std::lock_guard<std::mutex> state(state_mutex_);
      if (healthy == last_[i]) continue;
      last_[i] = healthy;
    }
    on_change_(static_cast<int>(i), healthy == 1, why);
  }
}

void HealthChecker::report_down(int replica) {
  std::lock_guard<std::mutex> state(state_mutex_);
  last_.at(static_cast<size_t>(replica)) = 0;
}

void HealthChecker::run() {
  std::unique_lock<std::mutex> lock(stop_mutex_);
  while (!stopping_) {
    lock.unlock();
    check_all();
    lock.lock();
    stop_signal_.wait_for(lock, interval_, [this] { return stopping_; });
  }
}

}  // namespace trellis
