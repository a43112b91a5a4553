// The quant table: every row round-trips within the bound it states, agrees with the dtype table,
// and a type without a row is refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "quant/quant.h"
#include "tensor/dtype.h"

namespace trellis {
namespace {

// The types of the dtype table, in id order.
std::vector<DType> known_types() {
  std::vector<DType> types;
  for (const DTypeInfo& info : kDTypeTable) {
    if (info.block_elems != 0) types.push_back(info.type);
  }
  return types;
}

// N(0, 1) values, every block of 256 scaled by 10^[-2, 2] (so blocks of every type see both
// small and large scales), and magnitudes kept above 2^-13 so that f16 stays in its normal range.
std::vector<float> test_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> exponent(-2.0f, 2.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; b += 256) {
    const float scale = std::pow(10.0f, exponent(rng));
    for (int64_t i = b; i < std::min(n, b + 256); ++i) {
      float v = normal(rng) * scale;
      if (std::fabs(v) < 0x1p-13f) v = v < 0 ? -0x1p-13f : 0x1p-13f;  // f16 normals: >= 2^-14
      x[static_cast<size_t>(i)] = v;
    }
  }
  // Edge cases: a zero block of 256 and a constant one.
  for (int64_t i = 0; i < 256 && 512 + i < n; ++i) {
    x[static_cast<size_t>(256 + i)] = 0.0f;
    x[static_cast<size_t>(512 + i)] = -0.75f;
  }
  return x;
}

TEST(QuantTable, EveryRowRoundTripsWithinItsStatedBound) {
  constexpr int64_t kN = 64 * 256;
  const std::vector<float> x = test_values(kN, 17);
  int n_rows = 0;
  for (DType type : known_types()) {
    const QuantTraits* row = quant_traits(type);
    if (row == nullptr) continue;
    ++n_rows;
    const std::string name(dtype_name(type));
    ASSERT_EQ(row->type, type) << name;
    const int64_t block = dtype_info(type).block_elems;
    std::vector<uint8_t> bytes(row_bytes(type, kN).value());
    std::vector<float> back(kN);
    quantize_row(type, x.data(), bytes.data(), kN);
    dequantize_row(type, bytes.data(), back.data(), kN);
    for (int64_t b = 0; b < kN; b += block) {
      float amax = 0.0f;
      for (int64_t i = b; i < b + block; ++i) amax = std::max(amax, std::fabs(x[i]));
      // 1e-5 relative covers the f32 roundings of the quantizer and of the dequantized product.
      const double bound = row->round_trip_bound * amax * (1.0 + 1e-5) + 1e-30;
      for (int64_t i = b; i < b + block; ++i) {
        const double err = std::fabs(static_cast<double>(back[i]) - x[i]);
        ASSERT_LE(err, bound) << name << " element " << i << ": " << x[i] << " came back as "
                              << back[i] << " (stated bound " << row->round_trip_bound
                              << " of the block's max |x| " << amax << ")";
      }
    }
  }
  // The types every model file so far uses; a row dropped from the table fails here.
  EXPECT_EQ(n_rows, 14);
}

// The bound is not vacuous: each lossy row comes within a factor 4 of it somewhere (so a bound
// stated far too loosely, which would hide a broken codec, fails too).
TEST(QuantTable, StatedBoundsAreTight) {
  constexpr int64_t kN = 64 * 256;
  const std::vector<float> x = test_values(kN, 23);
  for (DType type : known_types()) {
    const QuantTraits* row = quant_traits(type);
    if (row == nullptr || row->round_trip_bound == 0.0) continue;
    const int64_t block = dtype_info(type).block_elems;
    std::vector<uint8_t> bytes(row_bytes(type, kN).value());
    std::vector<float> back(kN);
    quantize_row(type, x.data(), bytes.data(), kN);
    dequantize_row(type, bytes.data(), back.data(), kN);
    double worst = 0.0;  // largest error as a fraction of the block's max |x|
    for (int64_t b = 0; b < kN; b += block) {
      float amax = 0.0f;
      for (int64_t i = b; i < b + block; ++i) amax = std::max(amax, std::fabs(x[i]));
      if (amax == 0.0f) continue;
      for (int64_t i = b; i < b + block; ++i)
        worst = std::max(worst, std::fabs(static_cast<double>(back[i]) - x[i]) / amax);
    }
    EXPECT_GT(worst, row->round_trip_bound / 4) << dtype_name(type);
  }
}

TEST(QuantTable, RowsAgreeWithTheDTypeTable) {
  for (DType type : known_types()) {
    const QuantTraits* row = quant_traits(type);
    if (row == nullptr) continue;
    EXPECT_EQ(static_cast<int64_t>(row->block_struct_bytes), dtype_info(type).block_bytes)
        << dtype_name(type);
    EXPECT_NE(row->quantize, nullptr) << dtype_name(type);
    EXPECT_NE(row->dequantize, nullptr) << dtype_name(type);
    EXPECT_TRUE(can_quantize(type) && can_dequantize(type)) << dtype_name(type);
    EXPECT_TRUE(require_quant(type, "test").ok()) << dtype_name(type);
  }
}

TEST(QuantTable, TypesWithoutARowAreRefusedByName) {
  for (DType type : {DType::Q8_1, DType::Q8_K, DType::I8, DType::I32, DType::F64}) {
    EXPECT_EQ(quant_traits(type), nullptr) << dtype_name(type);
    EXPECT_FALSE(can_quantize(type)) << dtype_name(type);
    EXPECT_FALSE(can_dequantize(type)) << dtype_name(type);
  }
  const Status status = require_quant(DType::Q8_1, "model synth");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().message,
            "model synth: tensor type q8_1 cannot be quantized or dequantized (supported: f32, "
            "f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, mxfp4)");
}

}  // namespace
}  // namespace trellis
