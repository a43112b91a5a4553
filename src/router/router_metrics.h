// What the router counts, for its GET /metrics (names prefixed "trellis_router:"): requests sent
// to each replica, how each was routed (a cache match, the least loaded, a balance fallback, round
// robin), upstream errors and retries, streams that broke off after their first byte, and, read
// from the router when rendered, each replica's health, requests in flight and tree size.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "router/routing_policy.h"

namespace trellis {

class RouterMetrics {
 public:
  explicit RouterMetrics(int n_replicas);

  void routed(int replica, RouteReason reason);
  void upstream_error(int replica);
  void retried() { retries_.fetch_add(1, std::memory_order_relaxed); }
  void stream_broken() { broken_streams_.fetch_add(1, std::memory_order_relaxed); }
  void no_replica() { no_replica_.fetch_add(1, std::memory_order_relaxed); }

  // `replicas`: the router's state now; `urls`: the replicas' addresses.
  std::string render(const std::vector<ReplicaState>& replicas,
                     const std::vector<std::string>& urls) const;

  uint64_t requests(int replica) const;
  uint64_t decisions(RouteReason reason) const;

 private:
  static constexpr size_t kReasons = 4;
  std::unique_ptr<std::atomic<uint64_t>[]> requests_;
  std::unique_ptr<std::atomic<uint64_t>[]> errors_;
  std::array<std::atomic<uint64_t>, kReasons> decisions_{};
  std::atomic<uint64_t> retries_{0};
  std::atomic<uint64_t> broken_streams_{0};
  std::atomic<uint64_t> no_replica_{0};
  int n_replicas_;
};

std::string_view route_reason_name(RouteReason reason);

}  // namespace trellis
