// Paged attention throughput on TinyLlama-shaped heads (32 query heads over 4 kv heads of 64):
// a prefill chunk of 256 rows of one sequence at a depth (the chunk's first position), and one
// decode row at that depth; f16, q8_0 and q4_0 KV; 2 threads; the best ISA variant. Counter:
// GFLOP/s (2 flops per query element per position read, for the scores and again for the sum of
// values), which is what a long prompt's prefill is bound by.
//   build/bench/attention_bench --benchmark_filter='prefill/.*'
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/attention.h"
#include "kv/kv_storage.h"

namespace trellis {
namespace {

constexpr int64_t kHeads = 32;
constexpr int64_t kKvHeads = 4;
constexpr int64_t kHeadDim = 64;
constexpr int32_t kBlockSize = 32;

// One sequence of `n_positions` random keys and values in scrambled blocks.
struct Sequence {
  KvStorage kv;
  std::vector<int32_t> table;
};

Sequence make_sequence(KvTypes types, int32_t n_positions) {
  KvLayout layout;
  layout.n_layer = 1;
  layout.n_kv_heads = kKvHeads;
  layout.head_dim = kHeadDim;
  layout.block_size = kBlockSize;
  layout.types = types;
  const int32_t n_blocks = (n_positions + kBlockSize - 1) / kBlockSize;
  Sequence s{KvStorage::create(layout, n_blocks).value(), {}};
  std::mt19937 rng(1);
  for (int32_t b = 0; b < n_blocks; ++b) s.table.push_back(b);
  std::shuffle(s.table.begin(), s.table.end(), rng);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> k(kKvHeads * kHeadDim), v(kKvHeads * kHeadDim);
  for (int32_t p = 0; p < n_positions; ++p) {
    for (float& x : k) x = value(rng);
    for (float& x : v) x = value(rng);
    kv_write(s.kv, 0, AttentionRow{p, s.table.data()}, k.data(), v.data());
  }
  return s;
}

void run(benchmark::State& state, KvTypes types, int32_t depth, int32_t n_rows) {
  const Sequence s = make_sequence(types, depth + n_rows);
  std::vector<AttentionRow> rows;
  double positions_read = 0;
  for (int32_t r = 0; r < n_rows; ++r) {
    rows.push_back(AttentionRow{depth + r, s.table.data()});
    positions_read += depth + r + 1;
  }
  std::vector<float> q(static_cast<size_t>(n_rows * kHeads * kHeadDim));
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> value(-0.5f, 0.5f);
  for (float& x : q) x = value(rng);
  std::vector<float> out(q.size());
  ThreadPool pool(2);
  AttentionScratch scratch;
  for (auto _ : state) {
    paged_attention(s.kv, 0, rows.data(), n_rows, kHeads, q.data(), out.data(), pool, scratch);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double flops = 4.0 * positions_read * kHeads * kHeadDim;
  state.counters["GFLOP/s"] = benchmark::Counter(
      flops * static_cast<double>(state.iterations()) * 1e-9, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(kernel_isa_name(best_kernel_isa())));
}

const int kRegistered = [] {
  for (KvType type : {KvType::F16, KvType::Q8_0, KvType::Q4_0}) {
    for (int32_t depth : {0, 4096, 16128}) {
      for (int32_t n_rows : {256, 1}) {
        const std::string name = std::string(n_rows > 1 ? "prefill" : "decode") + "/" +
                                 kv_type_name(type) + "/depth:" + std::to_string(depth);
        benchmark::RegisterBenchmark(
            name.c_str(),
            [=](benchmark::State& state) { run(state, KvTypes::both(type), depth, n_rows); })
            ->MeasureProcessCPUTime()
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  return 0;
}();

}  // namespace
}  // namespace trellis
