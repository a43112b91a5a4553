// `trellis route`: the cache-aware router, an OpenAI-compatible front that forwards each request
// to one of several replicas (router/router_service.h). Replicas are given by URL (--replica), or
// started here (--spawn N, with the serve flags that follow the router's own). Serves until
// SIGINT, SIGTERM or SIGHUP, then stops what it spawned.
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "http_front_options.h"
#include "kv/block_pool.h"
#include "replica_spawner.h"
#include "router/router_service.h"
#include "server/http_server.h"
#include "signal_waiter.h"

namespace trellis::cli {
namespace {

// How long spawned replicas get to load their model.
constexpr auto kSpawnReadyTimeout = std::chrono::seconds(600);

struct RouteArgs {
  HttpFrontOptions front;
  std::vector<std::string> replicas;
  int spawn = 0;
  std::string policy = "cache-aware";
  double match_threshold = 0.5;
  int32_t balance_abs = 32;
  double balance_rel = 1.5;
  std::string tree_size = "64MiB";
  std::string upstream_key;
  double health_interval_s = 2;
  double upstream_timeout_s = 600;
};

std::chrono::milliseconds milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// Everything but the replicas' addresses.
Result<RouterConfig> router_config(const RouteArgs& args) {
  RouterConfig config;
  const std::optional<RoutingPolicy> policy = parse_routing_policy(args.policy);
  if (!policy) return Error{"--policy must be cache-aware, round-robin or least-load"};
  config.routing.policy = *policy;
  if (!(args.match_threshold >= 0 && args.match_threshold <= 1))
    return Error{"--match-threshold must be in [0, 1]"};
  config.routing.match_threshold = args.match_threshold;
  if (args.balance_abs < 0) return Error{"--balance-abs must be >= 0"};
  config.routing.balance_abs = args.balance_abs;
  if (!(args.balance_rel >= 1)) return Error{"--balance-rel must be >= 1"};
  config.routing.balance_rel = args.balance_rel;
  Result<int64_t> tree_bytes = parse_byte_size(args.tree_size);
  if (!tree_bytes.ok()) return Error{"--tree-size: " + tree_bytes.error().message};
  config.routing.tree_bytes = static_cast<size_t>(*tree_bytes);
  if (!(args.health_interval_s > 0) || !(args.upstream_timeout_s > 0))
    return Error{"--health-interval and --upstream-timeout must be positive"};
  config.health_interval = milliseconds(args.health_interval_s);
  config.timeouts.read = milliseconds(args.upstream_timeout_s);
  config.upstream_key = args.upstream_key;
  return config;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
}

int run_route(RouteArgs& args, const std::vector<std::string>& extras) {
  const sigset_t signals = SignalWaiter::block_stop_signals();
  SignalWaiter& waiter = SignalWaiter::start(signals);

  Result<ServerConfig> server_config = args.front.server_config();
  if (!server_config.ok()) return fail(server_config.error().message);
  server_config->model_id = "router";
  server_config->chat_page = false;  // its metrics panel reads a replica's /metrics
  Result<RouterConfig> config = router_config(args);
  if (!config.ok()) return fail(config.error().message);
  if (args.spawn < 0) return fail("--spawn must be >= 0");
  if (args.spawn == 0 && !extras.empty())
    return fail("unknown option " + extras.front() + " (serve flags go with --spawn)");
  for (const std::string& url : args.replicas) {
    Result<ReplicaAddress> address = parse_replica_url(url);
    if (!address.ok()) return fail(address.error().message);
    config->replicas.push_back(*address);
  }
  std::unique_ptr<ReplicaSpawner> spawner;
  if (args.spawn > 0) {
    Result<std::unique_ptr<ReplicaSpawner>> started = ReplicaSpawner::start(args.spawn, extras);
    if (!started.ok()) return fail(started.error().message);
    spawner = std::move(*started);
    for (const ReplicaAddress& address : spawner->addresses()) {
      std::fprintf(stderr, "spawned replica %s\n", address.url().c_str());
      config->replicas.push_back(address);
    }
    if (Status ready = spawner->wait_ready(kSpawnReadyTimeout); !ready.ok())
      return fail(ready.error().message);
  }
  if (config->replicas.empty()) return fail("no replica: give --replica URL or --spawn N");

  RouterService router(*config, *server_config);
  HttpServer server(*server_config, RouterService::endpoints());
  if (Status bound = server.bind(); !bound.ok()) return fail(bound.error().message);
  std::thread serving([&server] { server.serve(); });
  server.set_api(router);
  waiter.serving();
  std::fprintf(stderr, "router listening on http://%s:%d (over %zu replicas, %s)\n",
               server_config->host.c_str(), server.port(), config->replicas.size(),
               args.policy.c_str());
  const int signal = waiter.wait();
  std::fprintf(stderr, "%s: shutting down\n", SignalWaiter::name(signal));
  server.shutdown();
  serving.join();
  return 0;
}

}  // namespace

void add_route_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd =
      app.add_subcommand("route", "Route OpenAI API requests over several replicas, cache-aware");
  auto args = std::make_shared<RouteArgs>();
  cmd->add_option("--replica", args->replicas, "A replica's URL, http://host:port (repeat)");
  cmd->add_option("--spawn", args->spawn,
                  "Start N local `trellis serve` replicas; the flags the router does not know "
                  "(-m model.gguf -t 1 ...) go to them");
  cmd->add_option("--policy", args->policy, "cache-aware, round-robin or least-load")
      ->capture_default_str();
  cmd->add_option("--match-threshold", args->match_threshold,
                  "Share of a prompt a replica's tree must match to win (cache-aware)")
      ->capture_default_str();
  cmd->add_option("--balance-abs", args->balance_abs,
                  "Requests in flight on the busiest replica before balancing wins over matching")
      ->capture_default_str();
  cmd->add_option("--balance-rel", args->balance_rel,
                  "... and its ratio to the least busy replica's")
      ->capture_default_str();
  cmd->add_option("--tree-size", args->tree_size, "Prompt text kept per replica's routing tree")
      ->capture_default_str();
  cmd->add_option("--upstream-key", args->upstream_key,
                  "API key sent to the replicas (default: none)");
  cmd->add_option("--health-interval", args->health_interval_s,
                  "Seconds between health checks of each replica")
      ->capture_default_str();
  cmd->add_option("--upstream-timeout", args->upstream_timeout_s,
                  "Seconds to wait for the next bytes of a replica's response")
      ->capture_default_str();
  args->front.add_to(*cmd);
  cmd->allow_extras();
  cmd->callback([&exit_code, args, cmd] { exit_code = run_route(*args, cmd->remaining()); });
}

}  // namespace trellis::cli
