// `trellis route --spawn N`: N `trellis serve` processes of this same binary on free loopback
// ports, for one-machine use. They get the serve flags given to the router, die with it (a
// replica is sent SIGTERM when the router exits, even when it is killed), and are stopped with
// SIGTERM (then SIGKILL after a grace period) when the spawner goes.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "router/upstream_call.h"

namespace trellis::cli {

class ReplicaSpawner {
 public:
  // Starts the replicas (without waiting for them to load).
  static Result<std::unique_ptr<ReplicaSpawner>> start(int n_replicas,
                                                       const std::vector<std::string>& serve_args);
  ~ReplicaSpawner();
  ReplicaSpawner(const ReplicaSpawner&) = delete;
  ReplicaSpawner& operator=(const ReplicaSpawner&) = delete;

  const std::vector<ReplicaAddress>& addresses() const { return addresses_; }
  // Waits until every replica answers GET /health with 200; an error names a replica that
  // exited (its own error is on stderr) or did not get ready in time.
  Status wait_ready(std::chrono::seconds timeout);

 private:
  ReplicaSpawner() = default;
  void stop_all();

  std::vector<ReplicaAddress> addresses_;
  std::vector<pid_t> pids_;
};

}  // namespace trellis::cli
