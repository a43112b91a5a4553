// A fixed set of worker threads that share out chunks of one task at a time, without creating
// threads per call.
//
// Work is claimed dynamically, chunk by chunk, and the caller takes part: when a worker is slow to
// wake (another process holds its core) the caller simply does more chunks instead of waiting for
// it. Chunks shrink as the work runs out (guided scheduling: each claims a share of what is left),
// so that the threads finish close together without paying for many small claims. Which thread
// runs which chunk therefore depends on timing, so a task must compute each item the same way
// whoever runs it and whatever chunk it falls in (the kernels' batch invariance).
// Workers spin briefly between tasks (decode steps come in quick succession), then sleep.
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

  // Calls task(thread, begin, end) over ranges that cover [0, n_items) exactly once; ranges are
  // multiples of `granule` long (except the last) and start at multiples of it. `thread` in
  // [0, size()) identifies the running thread (for per-thread scratch). Returns when all are done.
  // One caller at a time; a task must not call the pool again.
  void parallel_chunks(int64_t n_items, int64_t granule,
                       FunctionRef<void(int, int64_t, int64_t)> task);

  // The same without the thread index.
  void parallel_for(int64_t n_items, int64_t granule, FunctionRef<void(int64_t, int64_t)> task);

  // Calls task(i) once for each i in [0, size()), on whatever threads are available.
  void run(FunctionRef<void(int)> task);

  // How many workers are parked on the condition variable right now (they park after spinning
  // idle for a while). For tests and diagnostics: the value may change as soon as it is read.
  int n_sleeping() const;

  // The number of hardware threads (at least 1).
  static int default_thread_count();

 private:
  // The shared state packs the job's generation, the first unclaimed unit and the unit count (a
  // unit: unit_items_ consecutive items, a multiple of the granule):
  //   bits 63..40 generation | bits 39..20 next unit | bits 19..0 unit count
  // so that a claim reads nothing else before it succeeds.
  static constexpr int kUnitBits = 20;
  static constexpr uint64_t kUnitMask = (1u << kUnitBits) - 1;
  static constexpr int64_t kMaxUnits = kUnitMask;

  void worker_loop(int index);
  // Claims and runs chunks of generation `generation` until none is left.
  void work(int thread, uint64_t generation);
  // The units of the chunk that starts at unit `next` of `n_units`.
  int64_t chunk_units(uint64_t next, uint64_t n_units) const;

  int n_threads_;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> state_{0};
  std::atomic<int64_t> done_units_{0};
  std::atomic<bool> stopping_{false};
  uint64_t generation_ = 0;  // the caller's count of jobs (only the caller touches it)
  // The current job; written by the caller before publishing a new generation, read by a thread
  // only while it holds an unfinished chunk of that generation (so the job cannot change).
  FunctionRef<void(int, int64_t, int64_t)>* task_ = nullptr;
  int64_t n_items_ = 0;
  int64_t unit_items_ = 1;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  int sleepers_ = 0;  // guarded by mutex_
};

// The contiguous range part `index` of `n_parts` gets from [0, n_items), in `granule` units.
std::pair<int64_t, int64_t> split_range(int64_t n_items, int64_t granule, int index, int n_parts);

}  // namespace trellis
