// Routing decisions for scripted sequences: the exact replica each policy chooses, the balance
// fallback, isolation between namespaces, unhealthy and excluded replicas.
#include "router/routing_policy.h"

#include <gtest/gtest.h>

#include <string>

namespace trellis {
namespace {

RoutingConfig config(RoutingPolicy policy) {
  RoutingConfig c;
  c.policy = policy;
  c.match_threshold = 0.5;
  c.balance_abs = 4;
  c.balance_rel = 2.0;
  c.tree_bytes = 1 << 16;
  return c;
}

const std::string kSystemA(200, 'A');
const std::string kSystemB(200, 'B');

TEST(Routing, CacheAwareSendsAPrefixBackWhereItWent) {
  Router router(config(RoutingPolicy::CACHE_AWARE), 2);
  RouteDecision first = router.route(routing_key("", kSystemA + "q1"));
  EXPECT_EQ(first.replica, 0);  // nothing cached: least loaded, lowest index
  EXPECT_EQ(first.reason, RouteReason::LEAST_LOAD);
  RouteDecision other = router.route(routing_key("", kSystemB + "q1"));
  EXPECT_EQ(other.replica, 1);  // replica 0 is busier now
  for (int i = 0; i < 3; ++i) {
    RouteDecision a = router.route(routing_key("", kSystemA + "question " + std::to_string(i)));
    EXPECT_EQ(a.replica, 0);
    EXPECT_EQ(a.reason, RouteReason::CACHE_MATCH);
    EXPECT_GE(a.matched_bytes, 200u);
    RouteDecision b = router.route(routing_key("", kSystemB + "question " + std::to_string(i)));
    EXPECT_EQ(b.replica, 1);
  }
}

TEST(Routing, UnbalancedLoadGoesToTheLeastLoaded) {
  Router router(config(RoutingPolicy::CACHE_AWARE), 2);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(router.route(routing_key("", kSystemA + "x")).replica, 0);
  router.route(routing_key("", kSystemB));  // replica 1: 1 in flight; replica 0: 5 (> 4, > 2x)
  RouteDecision d = router.route(routing_key("", kSystemA + "x"));
  EXPECT_EQ(d.replica, 1);
  EXPECT_EQ(d.reason, RouteReason::BALANCE);
  for (int i = 0; i < 4; ++i) router.finished(0);  // replica 0 drains: 1 in flight
  d = router.route(routing_key("", kSystemA + "x"));
  EXPECT_EQ(d.replica, 0);
  EXPECT_EQ(d.reason, RouteReason::CACHE_MATCH);
}

TEST(Routing, NamespacesNeverMatchEachOther) {
  Router router(config(RoutingPolicy::CACHE_AWARE), 2);
  EXPECT_EQ(router.route(routing_key("key-1", kSystemA)).replica, 0);  // replica 0 busier now
  RouteDecision d = router.route(routing_key("key-2", kSystemA));
  EXPECT_EQ(d.reason, RouteReason::LEAST_LOAD);  // the same text, another namespace: no match
  EXPECT_EQ(d.matched_bytes, 0u);
  EXPECT_EQ(d.replica, 1);
}

TEST(Routing, EquallyLoadedReplicasTieOnTheSmallerTree) {
  Router router(config(RoutingPolicy::CACHE_AWARE), 3);
  // Sequential requests (nothing in flight) with new prefixes spread over the replicas.
  for (int i = 0; i < 3; ++i) {
    const std::string system(100 + 10 * i, static_cast<char>('a' + i));
    RouteDecision d = router.route(routing_key("", system));
    EXPECT_EQ(d.replica, i);
    EXPECT_EQ(d.reason, RouteReason::LEAST_LOAD);
    router.finished(d.replica);
  }
  // Then the fourth goes to the smallest tree (replica 0, 100 bytes + the separator).
  RouteDecision d = router.route(routing_key("", std::string(300, 'z')));
  EXPECT_EQ(d.replica, 0);
}

TEST(Routing, RoundRobinAndLeastLoadSkipUnhealthyAndExcluded) {
  Router rr(config(RoutingPolicy::ROUND_ROBIN), 3);
  EXPECT_EQ(rr.route("a").replica, 0);
  EXPECT_EQ(rr.route("a").replica, 1);
  rr.set_healthy(2, false);
  EXPECT_EQ(rr.route("a").replica, 0);
  EXPECT_EQ(rr.route("a", /*exclude=*/{1}).replica, 0);
  Router least(config(RoutingPolicy::LEAST_LOAD), 2);
  EXPECT_EQ(least.route("a").replica, 0);
  EXPECT_EQ(least.route("a").replica, 1);
  EXPECT_EQ(least.route("a").replica, 0);
  least.finished(1);
  EXPECT_EQ(least.route("a").replica, 1);
  least.set_healthy(0, false);
  least.set_healthy(1, false);
  EXPECT_EQ(least.route("a").replica, -1);  // nobody to send it to
}

TEST(Routing, PolicyNames) {
  for (RoutingPolicy p : {RoutingPolicy::CACHE_AWARE, RoutingPolicy::ROUND_ROBIN,
                          RoutingPolicy::LEAST_LOAD})
    EXPECT_EQ(parse_routing_policy(routing_policy_name(p)), p);
  EXPECT_FALSE(parse_routing_policy("random").has_value());
}

}  // namespace
}  // namespace trellis
