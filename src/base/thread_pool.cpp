#include "base/thread_pool.h"

#include <algorithm>
#include <cassert>

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
// A chunk is 1 / (kGuidedShare * threads) of the items left (at least one granule): the first
// chunks are large (few claims), the last ones a single granule, so a thread that runs out of
// work waits at most about one granule for the others; a share of a half per thread leaves
// enough chunks to even out uneven work (causal attention rows grow in cost) and late starters.
constexpr int64_t kGuidedShare = 2;

constexpr uint64_t generation_of(uint64_t state) {
  return state >> 40;
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_.store(true, std::memory_order_release);
  }
  wake_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

int ThreadPool::n_sleeping() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sleepers_;
}

int ThreadPool::default_thread_count() {
  return std::max(1u, std::thread::hardware_concurrency());
}

void ThreadPool::parallel_chunks(int64_t n_items, int64_t granule,
                                 FunctionRef<void(int, int64_t, int64_t)> task) {
  assert(granule >= 1);
  if (n_items <= 0) return;
  int64_t unit_items = granule;
  int64_t n_units = (n_items + unit_items - 1) / unit_items;
  if (n_units > kMaxUnits) {
    unit_items = (n_items + kMaxUnits - 1) / kMaxUnits;
    unit_items = (unit_items + granule - 1) / granule * granule;
    n_units = (n_items + unit_items - 1) / unit_items;
  }
  if (n_threads_ == 1 || n_units == 1) {
    task(0, 0, n_items);
    return;
  }
  task_ = &task;
  n_items_ = n_items;
  unit_items_ = unit_items;
  done_units_.store(0, std::memory_order_relaxed);
  const uint64_t generation = (++generation_) & ((uint64_t{1} << 24) - 1);
  state_.store((generation << 40) | static_cast<uint64_t>(n_units), std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (sleepers_ > 0) wake_.notify_all();
  }
  work(0, generation);
  // Only chunks someone claimed are outstanding; a worker that never woke up holds none.
  while (done_units_.load(std::memory_order_acquire) != n_units) TRELLIS_CPU_RELAX();
  task_ = nullptr;
}

int64_t ThreadPool::chunk_units(uint64_t next, uint64_t n_units) const {
  const auto left = static_cast<int64_t>(n_units - next);
  return std::max<int64_t>(1, left / (kGuidedShare * n_threads_));
}

void ThreadPool::work(int thread, uint64_t generation) {
  uint64_t state = state_.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t next = (state >> kUnitBits) & kUnitMask;
    const uint64_t n_units = state & kUnitMask;
    if (generation_of(state) != generation || next >= n_units) return;
    const int64_t units = chunk_units(next, n_units);
    if (!state_.compare_exchange_weak(state, state + (static_cast<uint64_t>(units) << kUnitBits),
                                      std::memory_order_acq_rel, std::memory_order_acquire)) {
      continue;  // `state` was reloaded
    }
    // These units are ours: the job cannot change until they are marked done.
    const auto begin = static_cast<int64_t>(next) * unit_items_;
    const int64_t end = std::min(n_items_, begin + units * unit_items_);
    (*task_)(thread, begin, end);
    done_units_.fetch_add(units, std::memory_order_release);
    state = state_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    int spins = 0;
    uint64_t generation = generation_of(state_.load(std::memory_order_acquire));
    while (generation == seen && !stopping_.load(std::memory_order_acquire)) {
      if (++spins < kSpinIterations) {
        TRELLIS_CPU_RELAX();
      } else {
        std::unique_lock<std::mutex> lock(mutex_);
        ++sleepers_;
        wake_.wait(lock, [&] {
          return stopping_.load(std::memory_order_acquire) ||
                 generation_of(state_.load(std::memory_order_acquire)) != seen;
        });
        --sleepers_;
        spins = 0;
      }
      generation = generation_of(state_.load(std::memory_order_acquire));
    }
    if (stopping_.load(std::memory_order_acquire)) return;
    seen = generation;
    work(index, generation);
  }
}

void ThreadPool::parallel_for(int64_t n_items, int64_t granule,
                              FunctionRef<void(int64_t, int64_t)> task) {
  parallel_chunks(n_items, granule, [&](int, int64_t begin, int64_t end) { task(begin, end); });
}

void ThreadPool::run(FunctionRef<void(int)> task) {
  parallel_chunks(n_threads_, 1, [&](int, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) task(static_cast<int>(i));
  });
}

std::pair<int64_t, int64_t> split_range(int64_t n_items, int64_t granule, int index, int n_parts) {
  const int64_t n_units = (n_items + granule - 1) / granule;
  const int64_t begin_unit = n_units * index / n_parts;
  const int64_t end_unit = n_units * (index + 1) / n_parts;
  return {std::min(n_items, begin_unit * granule), std::min(n_items, end_unit * granule)};
}

}  // namespace trellis
