// Matmul throughput per weight type on TinyLlama-shaped matrices (n_out x n_in): 2048x2048
// (attention), 5632x2048 (FFN gate/up), 2048x5632 (FFN down); decode (1 token), batched decode
// (8 tokens) and prefill (64
// tokens); 1 and 2 threads; the best ISA variant. Counters: GFLOP/s (2 flops per weight per
// token) and GB/s (weight bytes read per call; decode is bound by this one). TYPE_packed: Q4_0 and
// the float types in the layout the best variant packs them to at model load, where it has one
// (kernels/weight_pack.h).
//   build-kernels/bench/matmul_bench --benchmark_filter='q4_0/.*' --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/weight_pack.h"
#include "quant/half.h"
#include "quant/quant.h"

namespace trellis {
namespace {

// Random weights: float types through quantize_row, block types as random bytes with moderate f16
// scales (the kernels' speed does not depend on the values).
std::vector<uint8_t> make_weights(DType type, int64_t n_out, int64_t n_in) {
  const size_t row = static_cast<size_t>(row_bytes(type, n_in).value());
  std::vector<uint8_t> bytes(row * static_cast<size_t>(n_out));
  std::mt19937 rng(1);
  if (type == DType::F32 || type == DType::F16 || type == DType::BF16) {
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    std::vector<float> values(static_cast<size_t>(n_in));
    for (int64_t o = 0; o < n_out; ++o) {
      for (float& v : values) v = value(rng);
      quantize_row(type, values.data(), bytes.data() + row * static_cast<size_t>(o), n_in);
    }
    return bytes;
  }
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  const size_t block = static_cast<size_t>(dtype_info(type).block_bytes);
  const size_t scale_at = type == DType::Q6_K ? 208 : 0;
  const uint16_t d = f32_to_f16(0.01f);
  for (size_t b = 0; b < bytes.size() / block; ++b)
    std::memcpy(&bytes[b * block + scale_at], &d, 2);
  return bytes;
}

// `packed`: the matrix in the layout best_kernel_isa() packs it to at model load, as the model
// runs it (kernels/weight_pack.h); the benchmark is skipped where there is none.
void run(benchmark::State& state, DType type, int64_t n_out, int64_t n_in, int64_t n_tokens,
         int n_threads, bool packed) {
  const auto w = make_weights(type, n_out, n_in);
  WeightView view{type, w.data(), n_in, n_out};
  PackedBytes packed_bytes;
  if (packed) {
    if (!weight_packable(best_kernel_isa(), view)) {
      state.SkipWithError("no packed layout for this type and variant");
      return;
    }
    const size_t bytes = packed_weight_bytes(view);
    packed_bytes = allocate_packed_bytes(bytes);
    view = pack_weight(best_kernel_isa(), view, packed_bytes.get());
  }
  std::vector<float> x(static_cast<size_t>(n_tokens * n_in));
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (float& v : x) v = value(rng);
  std::vector<float> out(static_cast<size_t>(n_tokens * n_out));
  ThreadPool pool(n_threads);
  MatmulScratch scratch;
  for (auto _ : state) {
    matmul(view, x.data(), n_tokens, out.data(), pool, scratch);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double iterations = static_cast<double>(state.iterations());
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * static_cast<double>(n_out * n_in * n_tokens) * iterations * 1e-9,
                         benchmark::Counter::kIsRate);
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(w.size()) * iterations * 1e-9,
                                              benchmark::Counter::kIsRate);
  state.SetLabel(std::string(kernel_isa_name(best_kernel_isa())));
}

const int kRegistered = [] {
  const DType types[] = {DType::Q4_0, DType::Q8_0, DType::F16,  DType::F32,
                         DType::Q4_K, DType::Q6_K, DType::Q5_K, DType::Q4_1,
                         DType::Q5_0, DType::Q5_1, DType::BF16};
  // n_out, n_in: TinyLlama's, then bge-small's (a bert encoder: 384 wide, FFN 1536).
  const int64_t shapes[][2] = {{2048, 2048}, {5632, 2048}, {2048, 5632},
                               {384, 384},   {1536, 384},  {384, 1536}};
  // (type, packed): the Q4_0 and float matrices also as the AVX512 variant packs them.
  std::vector<std::pair<DType, bool>> variants;
  for (DType type : types) variants.emplace_back(type, false);
  for (DType type : {DType::Q4_0, DType::F16, DType::F32, DType::BF16})
    variants.emplace_back(type, true);
  for (const auto& variant : variants) {
    const DType type = variant.first;
    const bool packed = variant.second;
    for (const auto& shape : shapes) {
      for (int64_t n_tokens : {1, 8, 64}) {
        for (int n_threads : {1, 2}) {
          const std::string name = std::string(dtype_name(type)) + (packed ? "_packed" : "") + "/" +
                                   std::to_string(shape[0]) + "x" + std::to_string(shape[1]) +
                                   "/tokens:" + std::to_string(n_tokens) +
                                   "/threads:" + std::to_string(n_threads);
          benchmark::RegisterBenchmark(name.c_str(),
                                       [=](benchmark::State& state) {
                                         run(state, type, shape[0], shape[1], n_tokens, n_threads,
                                             packed);
                                       })
              ->MeasureProcessCPUTime()
              ->UseRealTime()
              ->Unit(benchmark::kMicrosecond);
        }
      }
    }
  }
  return 0;
}();

}  // namespace
}  // namespace trellis
