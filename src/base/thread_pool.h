// A fixed set of worker threads that run one task at a time on every thread, without creating
// threads per call. Workers spin briefly between tasks (decode steps come in quick succession),
// then sleep.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "base/function_ref.h"

namespace trellis {

class ThreadPool {
 public:
  // n_threads >= 1 counts the calling thread: n_threads - 1 workers are started.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls task(i) once for each i in [0, size()), i = 0 on the calling thread, and returns when
  // all calls have returned. One caller at a time; a task must not call run() again.
  void run(FunctionRef<void(int)> task);

  // Static partition of [0, n_items) into size() contiguous ranges (multiples of `granule` except
  // the last): task(begin, end) runs on each thread whose range is not empty. The same n_items
  // always splits the same way, so results never depend on timing.
  void parallel_for(int64_t n_items, int64_t granule, FunctionRef<void(int64_t, int64_t)> task);

  // The number of hardware threads (at least 1).
  static int default_thread_count();

 private:
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> generation_{0};  // bumped once per run(); workers wait for a change
  std::atomic<int> pending_{0};          // workers still running the current task
  std::atomic<bool> stopping_{false};
  FunctionRef<void(int)>* task_ = nullptr;
  std::mutex mutex_;
  std::condition_variable wake_;
};

// The contiguous range thread `index` of `n_threads` gets from [0, n_items), in `granule` units.
std::pair<int64_t, int64_t> split_range(int64_t n_items, int64_t granule, int index, int n_threads);

}  // namespace trellis
