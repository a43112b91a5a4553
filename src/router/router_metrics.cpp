#include "router/router_metrics.h"

#include "server/metrics.h"

namespace trellis {
namespace {

constexpr std::string_view kRouterMetricPrefix = "trellis_router:";
constexpr RouteReason kAllReasons[] = {RouteReason::CACHE_MATCH, RouteReason::LEAST_LOAD,
                                       RouteReason::BALANCE, RouteReason::ROUND_ROBIN};

MetricLabels replica_labels(size_t i, const std::vector<std::string>& urls) {
  return {{"replica", std::to_string(i)}, {"url", i < urls.size() ? urls[i] : ""}};
}

}  // namespace

std::string_view route_reason_name(RouteReason reason) {
  switch (reason) {
    case RouteReason::CACHE_MATCH:
      return "cache_match";
    case RouteReason::LEAST_LOAD:
      return "least_load";
    case RouteReason::BALANCE:
      return "balance";
    case RouteReason::ROUND_ROBIN:
      return "round_robin";
  }
  return "";
}

RouterMetrics::RouterMetrics(int n_replicas)
    : requests_(std::make_unique<std::atomic<uint64_t>[]>(static_cast<size_t>(n_replicas))),
      errors_(std::make_unique<std::atomic<uint64_t>[]>(static_cast<size_t>(n_replicas))),
      n_replicas_(n_replicas) {}

void RouterMetrics::routed(int replica, RouteReason reason) {
  requests_[static_cast<size_t>(replica)].fetch_add(1, std::memory_order_relaxed);
  decisions_[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
}

void RouterMetrics::upstream_error(int replica) {
  errors_[static_cast<size_t>(replica)].fetch_add(1, std::memory_order_relaxed);
}

uint64_t RouterMetrics::requests(int replica) const {
  return requests_[static_cast<size_t>(replica)].load();
}

uint64_t RouterMetrics::decisions(RouteReason reason) const {
  return decisions_[static_cast<size_t>(reason)].load();
}

std::string RouterMetrics::render(const std::vector<ReplicaState>& replicas,
                                  const std::vector<std::string>& urls) const {
  MetricsWriter w(kRouterMetricPrefix);
  const size_t n = static_cast<size_t>(n_replicas_);
  w.family("requests_total", "Requests sent to each replica (retries included).",
           MetricType::COUNTER);
  for (size_t i = 0; i < n; ++i) w.sample(replica_labels(i, urls), double(requests_[i].load()));
  w.family("upstream_errors_total",
           "Requests a replica failed (no connection, an error status, a broken response).",
           MetricType::COUNTER);
  for (size_t i = 0; i < n; ++i) w.sample(replica_labels(i, urls), double(errors_[i].load()));
  w.family("decisions_total",
           "Routing decisions by reason: cache_match (the longest cached prefix), least_load (no "
           "good match), balance (the load was unbalanced), round_robin.",
           MetricType::COUNTER);
  for (RouteReason reason : kAllReasons) {
    w.sample({{"reason", std::string(route_reason_name(reason))}},
             double(decisions(reason)));
  }
  w.counter("retries_total", "Requests sent again to another replica after a failure.",
            double(retries_.load()));
  w.counter("broken_streams_total",
            "Streams whose replica failed after their first byte (the client got an error event).",
            double(broken_streams_.load()));
  w.counter("no_replica_total", "Requests refused because no healthy replica was left.",
            double(no_replica_.load()));
  w.family("in_flight", "Requests each replica is serving for the router now.", MetricType::GAUGE);
  for (size_t i = 0; i < replicas.size(); ++i)
    w.sample(replica_labels(i, urls), replicas[i].in_flight);
  w.family("replica_healthy", "1 while the replica is in rotation, 0 while it is out.",
           MetricType::GAUGE);
  for (size_t i = 0; i < replicas.size(); ++i)
    w.sample(replica_labels(i, urls), replicas[i].healthy ? 1 : 0);
  w.family("tree_bytes", "Bytes of prompt text in each replica's routing tree.",
           MetricType::GAUGE);
  for (size_t i = 0; i < replicas.size(); ++i)
    w.sample(replica_labels(i, urls), double(replicas[i].tree.size_bytes()));
  w.family("tree_nodes", "Nodes of each replica's routing tree.", MetricType::GAUGE);
  for (size_t i = 0; i < replicas.size(); ++i)
    w.sample(replica_labels(i, urls), double(replicas[i].tree.n_nodes()));
  return w.text();
}

}  // namespace trellis
