#include "server/worker_threads.h"

#include <system_error>
#include <thread>

namespace trellis {

bool WorkerThreads::launch(std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++running_;
  }
  try {
    std::thread([this, work = std::move(work)]() mutable {
      work();
      work = nullptr;  // release what the work holds before wait_idle() may return
      std::lock_guard<std::mutex> lock(mutex_);
      if (--running_ == 0) idle_.notify_all();
    }).detach();
    return true;
  } catch (const std::system_error&) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--running_ == 0) idle_.notify_all();
    return false;
  }
}

int32_t WorkerThreads::running() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return running_;
}

void WorkerThreads::wait_idle() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return running_ == 0; });
}

}  // namespace trellis

namespace trellis {

bool WorkerThreads::wait_idle_for(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return idle_.wait_for(lock, timeout, [this] { return running_ == 0; });
}

}  // namespace trellis
