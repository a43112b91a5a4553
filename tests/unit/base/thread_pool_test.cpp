// The pool runs every index exactly once per run, partitions deterministically, and survives
// many quick runs (the decode loop's pattern).
#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>
#include <vector>

namespace trellis {
namespace {

TEST(ThreadPool, RunsEveryIndexOncePerRun) {
  for (int n : {1, 2, 3, 8}) {
    ThreadPool pool(n);
    EXPECT_EQ(pool.size(), n);
    std::vector<std::atomic<int>> calls(static_cast<size_t>(n));
    for (int round = 0; round < 200; ++round) {
      pool.run([&](int i) { calls[static_cast<size_t>(i)].fetch_add(1); });
    }
    for (auto& c : calls) EXPECT_EQ(c.load(), 200);
  }
}

TEST(ThreadPool, ParallelForCoversTheRangeExactlyOnce) {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 5, 64, 1000, 1001}) {
    std::vector<int> hits(static_cast<size_t>(n), 0);
    pool.parallel_for(n, 4, [&](int64_t begin, int64_t end) {
      EXPECT_EQ(begin % 4, 0);
      for (int64_t i = begin; i < end; ++i) ++hits[static_cast<size_t>(i)];
    });
    EXPECT_EQ(std::accumulate(hits.begin(), hits.end(), 0), n);
    for (int h : hits) EXPECT_EQ(h, 1);
  }
}

TEST(ThreadPool, SplitRangeIsContiguousAndBalanced) {
  int64_t expected_begin = 0;
  for (int i = 0; i < 3; ++i) {
    auto [begin, end] = split_range(10, 1, i, 3);
    EXPECT_EQ(begin, expected_begin);
    EXPECT_GE(end - begin, 3);
    EXPECT_LE(end - begin, 4);
    expected_begin = end;
  }
  EXPECT_EQ(expected_begin, 10);
  EXPECT_EQ(split_range(10, 8, 0, 2), (std::pair<int64_t, int64_t>{0, 8}));
  EXPECT_EQ(split_range(10, 8, 1, 2), (std::pair<int64_t, int64_t>{8, 10}));
}

// Waits (bounded) until `done()` holds; true when it did. The bound only limits how long a
// broken pool makes the test wait: a working one gets there in microseconds to milliseconds.
template <typename Predicate>
bool eventually(Predicate done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(ThreadPool, WorkersSleepAndWakeBetweenSparseRuns) {
  constexpr int kThreads = 3;
  ThreadPool pool(kThreads);
  for (int round = 0; round < 3; ++round) {
    // Idle workers spin briefly, then park: all of them, and they stay parked.
    ASSERT_TRUE(eventually([&] { return pool.n_sleeping() == kThreads - 1; }))
        << "round " << round << ": only " << pool.n_sleeping() << " workers parked";
    // A run whose items wait for each other: it completes only if every parked worker woke up
    // and took an item (the caller cannot run them all, since each waits for the others).
    std::atomic<int> arrived{0};
    std::atomic<bool> timed_out{false};
    std::vector<std::atomic<int>> by_thread(kThreads);
    pool.parallel_chunks(kThreads, 1, [&](int thread, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        by_thread[static_cast<size_t>(thread)].fetch_add(1);
        arrived.fetch_add(1);
        if (!eventually([&] { return arrived.load() == kThreads; })) timed_out = true;
      }
    });
    EXPECT_FALSE(timed_out) << "round " << round << ": a parked worker did not wake";
    for (int t = 0; t < kThreads; ++t)
      EXPECT_EQ(by_thread[static_cast<size_t>(t)].load(), 1)
          << "round " << round << " thread " << t;
  }
}

}  // namespace
}  // namespace trellis
