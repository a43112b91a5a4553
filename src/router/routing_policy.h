// Which replica a request goes to (after the SGLang paper's appendix A.4 and SGLang's router):
//
//   cache-aware  if the load is unbalanced (the busiest replica has more than balance_abs
//                requests in flight and more than balance_rel times the least busy's), the least
//                loaded; otherwise the replica whose tree holds the longest prefix of the request,
//                when that prefix is at least match_threshold of it; otherwise the least loaded.
//   round-robin  in turn.
//   least-load   the fewest requests in flight.
//
// Among equally loaded replicas, the one whose tree holds less text, then the lower index. Only
// healthy replicas are candidates. The text a tree sees
// starts with the request's namespace (API key digest and cache_salt), so that requests of
// different namespaces never match each other, as in the server.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "router/text_tree.h"

namespace trellis {

enum class RoutingPolicy { CACHE_AWARE, ROUND_ROBIN, LEAST_LOAD };

std::optional<RoutingPolicy> parse_routing_policy(std::string_view name);
std::string_view routing_policy_name(RoutingPolicy policy);

struct RoutingConfig {
  RoutingPolicy policy = RoutingPolicy::CACHE_AWARE;
  double match_threshold = 0.5;  // share of the request's text that must match
  int32_t balance_abs = 32;      // in-flight requests on the busiest replica before balancing ...
  double balance_rel = 1.5;      // ... and its ratio to the least busy
  size_t tree_bytes = 64 << 20;  // per replica
};

// The router's view of one replica.
struct ReplicaState {
  bool healthy = true;
  int32_t in_flight = 0;
  TextTree tree;
  explicit ReplicaState(size_t tree_bytes) : tree(tree_bytes) {}
};

enum class RouteReason { CACHE_MATCH, LEAST_LOAD, BALANCE, ROUND_ROBIN };

struct RouteDecision {
  int replica = -1;  // -1: no healthy replica
  RouteReason reason = RouteReason::LEAST_LOAD;
  size_t matched_bytes = 0;
};

class Router {
 public:
  Router(RoutingConfig config, int n_replicas);

  // Chooses a replica for `key` (namespace + prompt text, see routing_key) and records the
  // request there (in flight, and in its tree under cache-aware). `exclude`: replicas already
  // tried for this request.
  RouteDecision route(std::string_view key, const std::vector<int>& exclude = {});
  // The request sent by route() to `replica` ended.
  void finished(int replica);
  void set_healthy(int replica, bool healthy);
  // The healthy replica with the fewest requests in flight, not in `exclude` (-1: none).
  int least_loaded(const std::vector<int>& exclude) const;

  const std::vector<ReplicaState>& replicas() const { return replicas_; }
  const RoutingConfig& config() const { return config_; }

 private:
  // Healthy and not excluded.
  bool candidate(int replica, const std::vector<int>& exclude) const;
  bool unbalanced(const std::vector<int>& exclude) const;

  RoutingConfig config_;
  std::vector<ReplicaState> replicas_;
  uint64_t next_turn_ = 0;
};

// The text a request is routed by: its namespace, then the prompt (or the rendered chat).
std::string routing_key(std::string_view namespace_id, std::string_view text);

}  // namespace trellis
