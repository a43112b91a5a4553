#include "router/routing_policy.h"

#include <algorithm>

namespace trellis {

std::optional<RoutingPolicy> parse_routing_policy(std::string_view name) {
  if (name == "cache-aware") return RoutingPolicy::CACHE_AWARE;
  if (name == "round-robin") return RoutingPolicy::ROUND_ROBIN;
  if (name == "least-load") return RoutingPolicy::LEAST_LOAD;
  return std::nullopt;
}

std::string_view routing_policy_name(RoutingPolicy policy) {
  switch (policy) {
    case RoutingPolicy::CACHE_AWARE:
      return "cache-aware";
    case RoutingPolicy::ROUND_ROBIN:
      return "round-robin";
    case RoutingPolicy::LEAST_LOAD:
      return "least-load";
  }
  return "";
}

std::string routing_key(std::string_view namespace_id, std::string_view text) {
  // The separator cannot end a namespace id (hex digests, salts without NUL): two namespaces
  // never share a prefix past it.
  std::string key(namespace_id);
  key += '\0';
  key += text;
  return key;
}

Router::Router(RoutingConfig config, int n_replicas) : config_(config) {
  for (int i = 0; i < n_replicas; ++i) replicas_.emplace_back(config.tree_bytes);
}

bool Router::candidate(int replica, const std::vector<int>& exclude) const {
  return replicas_[static_cast<size_t>(replica)].healthy &&
         std::find(exclude.begin(), exclude.end(), replica) == exclude.end();
}

int Router::least_loaded(const std::vector<int>& exclude) const {
  int best = -1;
  for (int i = 0; i < static_cast<int>(replicas_.size()); ++i) {
    if (!candidate(i, exclude)) continue;
    const ReplicaState& r = replicas_[static_cast<size_t>(i)];
    if (best < 0) {
      best = i;
      continue;
    }
    // Ties go to the smaller tree: new prefixes spread over the replicas instead of piling onto
    // the first while the load is light.
    const ReplicaState& b = replicas_[static_cast<size_t>(best)];
    if (r.in_flight < b.in_flight ||
        (r.in_flight == b.in_flight && r.tree.size_bytes() < b.tree.size_bytes()))
      best = i;
  }
  return best;
}

bool Router::unbalanced(const std::vector<int>& exclude) const {
  int32_t most = -1, least = -1;
  for (int i = 0; i < static_cast<int>(replicas_.size()); ++i) {
    if (!candidate(i, exclude)) continue;
    const ReplicaState& r = replicas_[static_cast<size_t>(i)];
    most = std::max(most, r.in_flight);
    least = least < 0 ? r.in_flight : std::min(least, r.in_flight);
  }
  return most > config_.balance_abs && most > config_.balance_rel * least;
}

RouteDecision Router::route(std::string_view key, const std::vector<int>& exclude) {
  RouteDecision d;
  const int n = static_cast<int>(replicas_.size());
  switch (config_.policy) {
    case RoutingPolicy::ROUND_ROBIN:
      for (int tries = 0; tries < n && d.replica < 0; ++tries) {
        const int i = static_cast<int>(next_turn_++ % static_cast<uint64_t>(n));
        if (candidate(i, exclude)) d.replica = i;
      }
      d.reason = RouteReason::ROUND_ROBIN;
      break;
    case RoutingPolicy::LEAST_LOAD:
      d.replica = least_loaded(exclude);
      d.reason = RouteReason::LEAST_LOAD;
      break;
    case RoutingPolicy::CACHE_AWARE: {
      if (unbalanced(exclude)) {
        d.replica = least_loaded(exclude);
        d.reason = RouteReason::BALANCE;
        break;
      }
      int best = -1;
      size_t best_match = 0;
      for (int i = 0; i < n; ++i) {
        if (!candidate(i, exclude)) continue;
        ReplicaState& r = replicas_[static_cast<size_t>(i)];
        const size_t m = r.tree.match(key);
        if (best < 0 || m > best_match) {
          best = i;
          best_match = m;
        }
      }
      const bool good_match =
          best >= 0 && !key.empty() &&
          static_cast<double>(best_match) >= config_.match_threshold * static_cast<double>(key.size());
      d.replica = good_match ? best : least_loaded(exclude);
      d.reason = good_match ? RouteReason::CACHE_MATCH : RouteReason::LEAST_LOAD;
      d.matched_bytes = good_match ? best_match : 0;
      break;
    }
  }
  if (d.replica >= 0) {
    ReplicaState& r = replicas_[static_cast<size_t>(d.replica)];
    ++r.in_flight;
    if (config_.policy == RoutingPolicy::CACHE_AWARE) r.tree.insert(key);
  }
  return d;
}

void Router::finished(int replica) {
  ReplicaState& r = replicas_.at(static_cast<size_t>(replica));
  if (r.in_flight > 0) --r.in_flight;
}

void Router::set_healthy(int replica, bool healthy) {
  replicas_.at(static_cast<size_t>(replica)).healthy = healthy;
}

}  // namespace trellis
