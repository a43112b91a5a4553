// Throughput of the scalar reference dequantize_row / quantize_row, per type.
// One iteration converts a row of 16384 values (64 KiB of f32: the f32 side and the packed side
// both stay in L2, so this measures the arithmetic, not DRAM). bytes_per_second counts the f32
// side (4 bytes per value) so the types compare directly; "packed" is the bytes of the quantized
// side per second.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "quant/quant.h"
#include "tensor/dtype.h"

namespace trellis {
namespace {

constexpr int64_t kRowElems = 16384;

std::vector<float> random_row() {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(kRowElems);
  for (float& v : x) v = normal(rng);
  return x;
}

// K types cannot be quantized here yet, so their rows are random bytes with sane f16 scales.
std::vector<uint8_t> random_row_bytes(DType type) {
  const uint64_t n_bytes = row_bytes(type, kRowElems).value();
  std::vector<uint8_t> bytes(n_bytes);
  if (can_quantize(type)) {
    quantize_row(type, random_row().data(), bytes.data(), kRowElems);
    return bytes;
  }
  std::mt19937 rng(2);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  // Put 1.0 (0x3c00) into every f16 field so no NaN or inf slows the float paths.
  const int64_t block_bytes = dtype_info(type).block_bytes;
  for (uint64_t at = 0; at < n_bytes; at += static_cast<uint64_t>(block_bytes)) {
    auto set_one = [&](uint64_t offset) {
      bytes[at + offset] = 0x00;
      bytes[at + offset + 1] = 0x3c;
    };
    if (type == DType::Q6_K) {
      set_one(208);
    } else {  // q4_K, q5_K: d, dmin
      set_one(0);
      set_one(2);
    }
  }
  return bytes;
}

void set_rates(benchmark::State& state, DType type) {
  state.SetBytesProcessed(state.iterations() * kRowElems * static_cast<int64_t>(sizeof(float)));
  state.counters["packed"] =
      benchmark::Counter(static_cast<double>(state.iterations()) *
                             static_cast<double>(row_bytes(type, kRowElems).value()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
}

void bench_dequantize(benchmark::State& state, DType type) {
  const std::vector<uint8_t> src = random_row_bytes(type);
  std::vector<float> dst(kRowElems);
  for (auto _ : state) {
    dequantize_row(type, src.data(), dst.data(), kRowElems);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  set_rates(state, type);
}

void bench_quantize(benchmark::State& state, DType type) {
  const std::vector<float> src = random_row();
  std::vector<uint8_t> dst(row_bytes(type, kRowElems).value());
  for (auto _ : state) {
    quantize_row(type, src.data(), dst.data(), kRowElems);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  set_rates(state, type);
}

const bool registered = [] {
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1,
                     DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const std::string name(dtype_name(type));
    if (can_dequantize(type)) {
      benchmark::RegisterBenchmark(("dequantize_row/" + name).c_str(), bench_dequantize, type);
    }
    if (can_quantize(type)) {
      benchmark::RegisterBenchmark(("quantize_row/" + name).c_str(), bench_quantize, type);
    }
  }
  return true;
}();

}  // namespace
}  // namespace trellis
