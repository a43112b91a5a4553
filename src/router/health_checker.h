// Asks every replica's GET /health in turn, on a thread of its own, every `interval`: a replica
// that answers 200 is up, anything else (no connection, a timeout, 503 while it loads or after
// its engine failed) is down. Each change is reported once through `on_change` (the router takes
// a replica out of rotation and puts it back); the first round reports every replica. A replica
// that is up is also asked its GET /v1/models, reported through `on_models` each round (a
// server of several models serves those it lists).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "router/upstream_call.h"

namespace trellis {

// Whether `address` answers GET /health with 200 within `timeouts`; `why` says what it answered.
bool replica_healthy(const ReplicaAddress& address, const UpstreamTimeouts& timeouts,
                     std::string* why = nullptr);

// The model ids `address` lists at GET /v1/models (sending `api_key` when not empty).
Result<std::vector<std::string>> replica_models(const ReplicaAddress& address,
                                                const UpstreamTimeouts& timeouts,
                                                const std::string& api_key);

class HealthChecker {
 public:
  using OnChange = std::function<void(int replica, bool healthy, const std::string& why)>;
  using OnModels = std::function<void(int replica, std::vector<std::string> models)>;

  // `api_key`: sent with GET /v1/models (empty: none); `on_models` may be null.
  HealthChecker(std::vector<ReplicaAddress> replicas, std::chrono::milliseconds interval,
                OnChange on_change, std::string api_key = "", OnModels on_models = nullptr);
  ~HealthChecker();  // stops the thread
  HealthChecker(const HealthChecker&) = delete;
  HealthChecker& operator=(const HealthChecker&) = delete;

  // Checks every replica now (on the calling thread), reporting changes; the thread does this
  // every interval.
  void check_all();
  // A request found `replica` down (the router took it out): the next check that finds it up
  // reports the change.
  void report_down(int replica);

 private:
  void run();

  const std::vector<ReplicaAddress> replicas_;
  const std::chrono::milliseconds interval_;
  const OnChange on_change_;
  const std::string api_key_;
  const OnModels on_models_;
  std::mutex check_mutex_;  // one round at a time
  std::mutex state_mutex_;
  std::vector<int> last_;  // -1 before the first check, else 0/1; guarded by state_mutex_
  std::mutex stop_mutex_;
  std::condition_variable stop_signal_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace trellis
