// quantize_row: exact bytes for hand-made blocks (chosen so the scale is a power of two and the
// rounding rule of each format is visible), zero blocks, and round-trip error bounds on random
// rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "quant/half.h"
#include "quant/quant.h"
#include "tensor/dtype.h"

namespace trellis {
namespace {

std::vector<uint8_t> quantize(DType type, const std::vector<float>& x) {
  std::vector<uint8_t> bytes(row_bytes(type, static_cast<int64_t>(x.size())).value(), 0xee);
  quantize_row(type, x.data(), bytes.data(), static_cast<int64_t>(x.size()));
  return bytes;
}

std::vector<float> dequantize(DType type, const std::vector<uint8_t>& bytes, size_t n) {
  std::vector<float> out(n, NAN);
  dequantize_row(type, bytes.data(), out.data(), static_cast<int64_t>(n));
  return out;
}

uint16_t u16_at(const std::vector<uint8_t>& bytes, size_t offset) {
  return static_cast<uint16_t>(bytes[offset] | (bytes[offset + 1] << 8));
}

// ---- q8_0: d = amax / 127, q = roundf(x / d) (halves away from zero) ----

TEST(QuantQuantize, Q8_0ExactBytes) {
  // Block 0: amax = 127, so d = 1 exactly and q = roundf(x).
  // Block 1: amax = 63.5, so d = 0.5 and q = roundf(2 x).
  std::vector<float> x(64, 0.0f);
  // 0.49999997 = 0.5 - 2^-25 rounds to 0 (a rounding that adds 0.5 first would give 1).
  const float block0[] = {127,  -127,    2.5f, -2.5f,       0.49f,        -0.5f, 1.5f,
                          0.5f, -126.6f, 3,    0.49999997f, -0.49999997f, 126.5f};
  const int8_t q0[] = {127, -127, 3, -3, 0, -1, 2, 1, -127, 3, 0, 0, 127};
  const float block1[] = {63.5f, -63.5f, 1.25f, -0.75f, 0.2f, 0.25f, -30.25f};
  const int8_t q1[] = {127, -127, 3, -2, 0, 1, -61};
  std::copy(std::begin(block0), std::end(block0), x.begin());
  std::copy(std::begin(block1), std::end(block1), x.begin() + 32);
  const auto bytes = quantize(DType::Q8_0, x);
  ASSERT_EQ(bytes.size(), 68u);
  EXPECT_EQ(u16_at(bytes, 0), 0x3c00);   // d = 1
  EXPECT_EQ(u16_at(bytes, 34), 0x3800);  // d = 0.5
  for (int l = 0; l < 32; ++l) {
    const int expect0 = l < 13 ? q0[l] : 0;
    const int expect1 = l < 7 ? q1[l] : 0;
    EXPECT_EQ(static_cast<int8_t>(bytes[2 + l]), expect0) << l;
    EXPECT_EQ(static_cast<int8_t>(bytes[36 + l]), expect1) << l;
  }
}

// ---- q4_0: d = max / -8 with max the signed value of largest magnitude,
//      q = min(15, trunc(x / d + 8.5)) ----

TEST(QuantQuantize, Q4_0ExactBytes) {
  // max = -8 (x[0]) so d = 1: q = trunc(x + 8.5), i.e. halves round up.
  std::vector<float> x(32, 0.0f);
  const float in[] = {-8, 7, 7.9f, 0.4f, 0.5f, -0.5f, -0.6f, -7.6f, -7.5f, 3.2f};
  const int q[] = {0, 15, 15, 8, 9, 8, 7, 0, 1, 11};  // 7.9 + 8.5 = 16.4 -> 16 -> clamped 15
  std::copy(std::begin(in), std::end(in), x.begin());
  x[16] = 1;   // q 9
  x[17] = -3;  // q 5
  x[31] = 7;   // q 15
  const auto bytes = quantize(DType::Q4_0, x);
  ASSERT_EQ(bytes.size(), 18u);
  EXPECT_EQ(u16_at(bytes, 0), 0x3c00);
  int codes[32];
  for (int i = 0; i < 32; ++i) codes[i] = 8;  // zeros
  for (int i = 0; i < 10; ++i) codes[i] = q[i];
  codes[16] = 9;
  codes[17] = 5;
  codes[31] = 15;
  for (int l = 0; l < 16; ++l) {
    EXPECT_EQ(bytes[2 + l], codes[l] | (codes[l + 16] << 4)) << l;
  }
  EXPECT_EQ(bytes[2], 0x90);   // codes 0 and 9
  EXPECT_EQ(bytes[17], 0xf8);  // codes 8 (x[15] = 0) and 15
}

TEST(QuantQuantize, Q4_0SignOfTheScaleFollowsTheLargestMagnitude) {
  // x[0] = 16 is the largest magnitude: d = 16 / -8 = -2 (f16 0xc000), 1/d = -0.5.
  // x[1] = -16 ties in magnitude but comes later, so it does not change max; its code is
  // trunc(8 + 8.5) = 16, clamped to 15.
  std::vector<float> x(32, 0.0f);
  x[0] = 16;
  x[1] = -16;
  x[2] = -14;  // 7 + 8.5 -> 15
  x[3] = 3;    // -1.5 + 8.5 -> 7
  const auto bytes = quantize(DType::Q4_0, x);
  EXPECT_EQ(u16_at(bytes, 0), 0xc000);
  EXPECT_EQ(bytes[2], 0x80);  // code 0 | 8 << 4 (x[16] = 0)
  EXPECT_EQ(bytes[3], 0x8f);
  EXPECT_EQ(bytes[4], 0x8f);
  EXPECT_EQ(bytes[5], 0x87);
  // With the negative value first the scale flips sign.
  std::swap(x[0], x[1]);
  const auto flipped = quantize(DType::Q4_0, x);
  EXPECT_EQ(u16_at(flipped, 0), 0x4000);  // d = -16 / -8 = 2
}

// ---- q4_1: d = (max - min) / 15, m = min, q = min(15, trunc((x - min) / d + 0.5)) ----

TEST(QuantQuantize, Q4_1ExactBytes) {
  // min = -1, max = 14: d = 1, m = -1 (f16 0xbc00), q = trunc(x + 1.5).
  std::vector<float> x(32, 2.0f);  // q 3
  x[0] = -1;                       // q 0
  x[1] = 14;                       // q 15
  x[2] = 0.4f;                     // 1.9 -> 1
  x[3] = 0.5f;                     // 2.0 -> 2
  x[20] = 9.6f;                    // 11.1 -> 11
  const auto bytes = quantize(DType::Q4_1, x);
  ASSERT_EQ(bytes.size(), 20u);
  EXPECT_EQ(u16_at(bytes, 0), 0x3c00);
  EXPECT_EQ(u16_at(bytes, 2), 0xbc00);
  EXPECT_EQ(bytes[4], 0x30);  // codes 0 | 3 << 4
  EXPECT_EQ(bytes[5], 0x3f);
  EXPECT_EQ(bytes[6], 0x31);
  EXPECT_EQ(bytes[7], 0x32);
  EXPECT_EQ(bytes[8], 0xb3);  // x[4] = 2 -> 3, x[20] -> 11
  for (int l = 5; l < 16; ++l) EXPECT_EQ(bytes[4 + l], 0x33) << l;
}

// The 5-bit codes of the q5 tests, and their qh: bits {1,2,4,6,9,10,13,14} of elements 0..15
// and {1,2,5,6,9,10,13,14} of elements 16..31 are set, i.e. qh = 0x66666656.
constexpr int kCodes5[32] = {0, 16, 31, 15, 17, 1,  30, 14, 2, 18, 29, 13, 3, 19, 28, 12,
                             4, 20, 27, 11, 5,  21, 26, 10, 6, 22, 25, 9,  7, 23, 24, 8};
constexpr uint8_t kQh5[4] = {0x56, 0x66, 0x66, 0x66};

void expect_q5_codes(const std::vector<uint8_t>& bytes, size_t qh_offset) {
  for (int k = 0; k < 4; ++k) EXPECT_EQ(bytes[qh_offset + k], kQh5[k]) << k;
  for (int l = 0; l < 16; ++l) {
    EXPECT_EQ(bytes[qh_offset + 4 + l], (kCodes5[l] & 15) | ((kCodes5[l + 16] & 15) << 4)) << l;
  }
  EXPECT_EQ(bytes[qh_offset + 4], 0x40);  // codes 0 and 4
  EXPECT_EQ(bytes[qh_offset + 6], 0xbf);  // codes 31 and 27
}

// ---- q5_0: d = max / -16, q = min(31, trunc(x / d + 16.5)) ----

TEST(QuantQuantize, Q5_0ExactBytes) {
  // x = code - 16, so max = -16 (x[0], first of the largest magnitude) and d = 1.
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(kCodes5[i] - 16);
  const auto bytes = quantize(DType::Q5_0, x);
  ASSERT_EQ(bytes.size(), 22u);
  EXPECT_EQ(u16_at(bytes, 0), 0x3c00);
  expect_q5_codes(bytes, 2);
  const auto back = dequantize(DType::Q5_0, bytes, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(back[i], x[i]) << i;
}

TEST(QuantQuantize, Q5_0RoundsHalvesUpAndClamps) {
  std::vector<float> x(32, 0.0f);  // code 16
  x[0] = -16;                      // d = 1; code 0
  x[1] = 15.6f;                    // 32.1 -> 32 -> clamped to 31
  x[2] = -0.5f;                    // 16.0 -> 16
  x[3] = 0.5f;                     // 17.0 -> 17
  x[4] = -0.6f;                    // 15.9 -> 15
  const auto bytes = quantize(DType::Q5_0, x);
  // qh: codes >= 16 set their bit: all but elements 0 and 4 -> 0xffffffee.
  EXPECT_EQ(bytes[2], 0xee);
  EXPECT_EQ(bytes[3], 0xff);
  EXPECT_EQ(bytes[4], 0xff);
  EXPECT_EQ(bytes[5], 0xff);
  EXPECT_EQ(bytes[6], 0x00);   // codes 0, 16: low nibbles 0, 0
  EXPECT_EQ(bytes[7], 0x0f);   // 31, 16
  EXPECT_EQ(bytes[8], 0x00);   // 16, 16
  EXPECT_EQ(bytes[9], 0x01);   // 17, 16
  EXPECT_EQ(bytes[10], 0x0f);  // 15, 16
}

// ---- q5_1: d = (max - min) / 31, m = min, q = trunc((x - min) / d + 0.5) ----

TEST(QuantQuantize, Q5_1ExactBytes) {
  // x = code, so min = 0, max = 31, d = 1, m = 0.
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(kCodes5[i]);
  const auto bytes = quantize(DType::Q5_1, x);
  ASSERT_EQ(bytes.size(), 24u);
  EXPECT_EQ(u16_at(bytes, 0), 0x3c00);
  EXPECT_EQ(u16_at(bytes, 2), 0x0000);
  expect_q5_codes(bytes, 4);
  const auto back = dequantize(DType::Q5_1, bytes, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(back[i], x[i]) << i;
}

// ---- f16 / bf16 rows ----

TEST(QuantQuantize, F16AndBf16Rows) {
  const std::vector<float> x = {1.0f, -0.5f, 65520.0f, 1.0f + 0x1p-11f, 0x1p-25f, 3.0f};
  const auto f16 = quantize(DType::F16, x);
  const uint16_t f16_expected[] = {0x3c00, 0xb800, 0x7c00, 0x3c00, 0x0000, 0x4200};
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(u16_at(f16, 2 * i), f16_expected[i]) << i;
  const auto bf16 = quantize(DType::BF16, x);
  const uint16_t bf16_expected[] = {0x3f80, 0xbf00, 0x4780, 0x3f80, 0x3300, 0x4040};
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(u16_at(bf16, 2 * i), bf16_expected[i]) << i;
}

// ---- zero blocks: d = 0, codes of zero, and zeros back (no NaN from 0 / 0) ----

TEST(QuantQuantize, ZeroBlocksGiveZeroScalesAndZerosBack) {
  const std::vector<float> zeros(64, 0.0f);
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1}) {
    const auto bytes = quantize(t, zeros);
    // d: 0 / -8 and 0 / -16 are -0 in the symmetric 4/5-bit types, so their f16 is 0x8000.
    const bool negative_zero = t == DType::Q4_0 || t == DType::Q5_0;
    EXPECT_EQ(u16_at(bytes, 0), negative_zero ? 0x8000 : 0x0000) << dtype_name(t);
    const auto back = dequantize(t, bytes, zeros.size());
    for (float v : back) ASSERT_EQ(v, 0.0f) << dtype_name(t);
  }
  EXPECT_EQ(quantize(DType::Q4_0, zeros)[2], 0x88);  // 0 * (1/d := 0) + 8.5 -> code 8
  EXPECT_EQ(quantize(DType::Q8_0, zeros)[2], 0x00);
}

TEST(QuantQuantize, ConstantBlocksOfTheOffsetTypesAreExact) {
  // max == min: d = 0, m = the value; every code 0.
  const std::vector<float> x(32, -3.0f);
  for (DType t : {DType::Q4_1, DType::Q5_1}) {
    const auto bytes = quantize(t, x);
    EXPECT_EQ(u16_at(bytes, 0), 0x0000) << dtype_name(t);
    EXPECT_EQ(u16_at(bytes, 2), 0xc200) << dtype_name(t);  // -3
    const auto back = dequantize(t, bytes, 32);
    for (float v : back) ASSERT_EQ(v, -3.0f) << dtype_name(t);
  }
}

// ---- round trips ----

// Values that the formats represent exactly come back exactly: integers times a power-of-two
// scale, with the extreme code present so the scale comes out as chosen.
TEST(QuantQuantize, RepresentableValuesRoundTripExactly) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> code(-127, 127);
  std::vector<float> x(256);
  for (int b = 0; b < 8; ++b) {
    const float d = std::ldexp(1.0f, b - 4);  // 1/16 .. 8
    for (int l = 0; l < 32; ++l) x[32 * b + l] = static_cast<float>(code(rng)) * d;
    x[32 * b + 5] = 127 * d;  // amax = 127 d
  }
  const auto q8 = dequantize(DType::Q8_0, quantize(DType::Q8_0, x), x.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(q8[i], x[i]) << i;

  std::uniform_int_distribution<int> code4(-7, 7);
  for (int b = 0; b < 8; ++b) {
    const float d = std::ldexp(1.0f, 3 - b);
    for (int l = 0; l < 32; ++l) x[32 * b + l] = static_cast<float>(code4(rng)) * d;
    x[32 * b + 9] = -8 * d;  // max = -8 d, so the scale is d
  }
  const auto q4 = dequantize(DType::Q4_0, quantize(DType::Q4_0, x), x.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(q4[i], x[i]) << i;

  for (DType t : {DType::F16, DType::BF16}) {
    const auto back = dequantize(t, quantize(t, x), x.size());  // small integers * 2^k
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(back[i], x[i]) << dtype_name(t) << " " << i;
  }
}

// Random rows: every value within the format's error bound. With the f32 scale d the codes are
// within half a step (a full step where a code is clamped), and storing d and m as f16 adds at
// most |code| * |d| * 2^-11 and |m| * 2^-11.
TEST(QuantQuantize, RandomRowsStayWithinTheErrorBound) {
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  constexpr int kN = 4096;
  std::vector<float> x(kN);
  for (int i = 0; i < kN; ++i) x[i] = normal(rng) * ((i / 32) % 5 == 0 ? 100.0f : 1.0f) + 0.3f;
  constexpr float kF16Eps = 0x1p-11f;
  const float slack = 1e-6f;  // f32 rounding of x / d and of the dequantized product

  struct Case {
    DType type;
    int max_code;  // largest |code| (symmetric) or code (offset types)
    bool symmetric;
  };
  for (const Case c :
       {Case{DType::Q8_0, 127, true}, Case{DType::Q4_0, 8, true}, Case{DType::Q5_0, 16, true},
        Case{DType::Q4_1, 15, false}, Case{DType::Q5_1, 31, false}}) {
    const auto back = dequantize(c.type, quantize(c.type, x), x.size());
    double sum_sq = 0;
    for (int b = 0; b < kN / 32; ++b) {
      const float* xb = &x[32 * b];
      float lo = xb[0], hi = xb[0], amax = 0;
      for (int l = 0; l < 32; ++l) {
        lo = std::min(lo, xb[l]);
        hi = std::max(hi, xb[l]);
        amax = std::max(amax, std::fabs(xb[l]));
      }
      const float step = c.symmetric ? amax / c.max_code : (hi - lo) / c.max_code;
      const float offset = c.symmetric ? 0.0f : std::fabs(lo);
      // Q4_0 / Q5_0 clamp the code of -max (the opposite extreme) to one step short.
      const float code_error = (c.type == DType::Q4_0 || c.type == DType::Q5_0) ? step : step / 2;
      const float bound =
          code_error + c.max_code * step * kF16Eps + offset * kF16Eps + slack * (amax + step);
      for (int l = 0; l < 32; ++l) {
        const float err = std::fabs(back[32 * b + l] - xb[l]);
        ASSERT_LE(err, bound) << dtype_name(c.type) << " block " << b << " elem " << l;
        sum_sq += static_cast<double>(err) * err / (static_cast<double>(step) * step);
      }
    }
    // Rounding errors are near uniform in [-step/2, step/2]: mean square about 1/12 of a step.
    const double mean_sq = sum_sq / kN;
    EXPECT_LT(mean_sq, 0.1) << dtype_name(c.type);
    EXPECT_GT(mean_sq, 0.06) << dtype_name(c.type);
  }

  const auto f16 = dequantize(DType::F16, quantize(DType::F16, x), x.size());
  const auto bf16 = dequantize(DType::BF16, quantize(DType::BF16, x), x.size());
  for (int i = 0; i < kN; ++i) {
    // Half an ulp: 2^-11 relative for f16 normals, 2^-25 absolute below them (subnormals).
    ASSERT_LE(std::fabs(f16[i] - x[i]), std::max(std::fabs(x[i]) * 0x1p-11f, 0x1p-25f)) << i;
    ASSERT_LE(std::fabs(bf16[i] - x[i]), std::fabs(x[i]) * 0x1p-8f) << i;
  }
}

TEST(QuantQuantize, BlocksAreIndependent) {
  // Quantizing a row equals quantizing each block on its own and concatenating.
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uniform(-5.0f, 5.0f);
  std::vector<float> x(96);
  for (float& v : x) v = uniform(rng);
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1}) {
    const auto row = quantize(t, x);
    const size_t block_bytes = static_cast<size_t>(dtype_info(t).block_bytes);
    for (int b = 0; b < 3; ++b) {
      const std::vector<float> one(x.begin() + 32 * b, x.begin() + 32 * b + 32);
      const auto alone = quantize(t, one);
      ASSERT_TRUE(std::equal(alone.begin(), alone.end(),
                             row.begin() + static_cast<std::ptrdiff_t>(b * block_bytes)))
          << dtype_name(t) << " block " << b;
    }
  }
}

}  // namespace
}  // namespace trellis

namespace trellis {
namespace {

// mxfp4: the scale puts the largest magnitude on the top codes; values between codes round to
// the nearest; a zero block has scale 0; infinities saturate and NaN becomes 0.
TEST(QuantQuantize, Mxfp4ExactBytes) {
  std::vector<float> x(64, 0.0f);
  x[0] = 6.0f;   // amax: e = floor(log2 6) + 125 = 127, scale 2^-1, so 6 is code 7 (12 units)
  x[1] = -1.0f;  // 2 units: code 2, negative: 10
  x[2] = 2.4f;   // 4.8 units: nearest 4 (code 4)
  x[17] = 0.7f;  // 1.4 units: nearest 1 (code 1), in the high nibble of byte 1
  x[32] = INFINITY;
  x[33] = NAN;
  x[34] = -INFINITY;
  std::vector<uint8_t> bytes(34);
  quantize_row(DType::MXFP4, x.data(), bytes.data(), 64);
  EXPECT_EQ(bytes[0], 127);
  EXPECT_EQ(bytes[1], 7);  // element 0 (low), element 16 = 0 (high)
  EXPECT_EQ(bytes[2], 10 | 1 << 4);
  EXPECT_EQ(bytes[3], 4);
  EXPECT_EQ(bytes[17], 254);  // the infinite block's scale
  EXPECT_EQ(bytes[18], 7);    // +inf: +12 units
  EXPECT_EQ(bytes[19], 0);    // NaN: 0
  EXPECT_EQ(bytes[20], 15);   // -inf: -12 units
  std::vector<float> zeros(32, 0.0f);
  std::vector<uint8_t> zero_block(17, 0xff);
  quantize_row(DType::MXFP4, zeros.data(), zero_block.data(), 32);
  EXPECT_EQ(zero_block, std::vector<uint8_t>(17, 0));
}

}  // namespace
}  // namespace trellis
