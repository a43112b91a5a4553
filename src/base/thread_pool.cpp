#include "base/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TRELLIS_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define TRELLIS_CPU_RELAX() asm volatile("yield")
#else
#define TRELLIS_CPU_RELAX() ((void)0)
#endif

namespace trellis {
namespace {
constexpr int kSpinIterations = 1 << 14;  // roughly tens of microseconds before sleeping
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_.store(true, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

int ThreadPool::default_thread_count() {
  return std::max(1u, std::thread::hardware_concurrency());
}

void ThreadPool::run(FunctionRef<void(int)> task) {
  if (n_threads_ == 1) {
    task(0);
    return;
  }
  task_ = &task;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  task(0);
  while (pending_.load(std::memory_order_acquire) != 0) TRELLIS_CPU_RELAX();
  task_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    int spins = 0;
    uint64_t current = generation_.load(std::memory_order_acquire);
    while (current == seen) {
      if (++spins < kSpinIterations) {
        TRELLIS_CPU_RELAX();
      } else {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      }
      current = generation_.load(std::memory_order_acquire);
    }
    seen = current;
    if (stopping_.load(std::memory_order_relaxed)) return;
    (*task_)(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

std::pair<int64_t, int64_t> split_range(int64_t n_items, int64_t granule, int index,
                                        int n_threads) {
  const int64_t n_units = (n_items + granule - 1) / granule;
  const int64_t begin_unit = n_units * index / n_threads;
  const int64_t end_unit = n_units * (index + 1) / n_threads;
  return {std::min(n_items, begin_unit * granule), std::min(n_items, end_unit * granule)};
}

void ThreadPool::parallel_for(int64_t n_items, int64_t granule,
                              FunctionRef<void(int64_t, int64_t)> task) {
  run([&](int index) {
    auto [begin, end] = split_range(n_items, granule, index, n_threads_);
    if (begin < end) task(begin, end);
  });
}

}  // namespace trellis
