// Threads that serve requests away from the I/O thread: one per request being served (a
// generation blocks its thread while it runs), counted so that shutdown can wait for them all.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

namespace trellis {

class WorkerThreads {
 public:
  // Runs `work` on a new thread; false when no thread could be started (resource exhaustion).
  bool launch(std::function<void()> work);
  int32_t running() const;
  // Returns once every launched work has returned.
  void wait_idle();
  // The same, giving up after `timeout`; true when idle.
  bool wait_idle_for(std::chrono::milliseconds timeout);

 private:
  mutable std::mutex mutex_;
  std::condition_variable idle_;
  int32_t running_ = 0;
};

}  // namespace trellis
