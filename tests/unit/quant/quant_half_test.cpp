// f16 and bf16 conversions: every 16-bit pattern against an independent decoder, rounding against a
// nearest-value oracle, and the hand-picked cases that matter (ties, subnormals, overflow, NaN).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "quant/half.h"

namespace trellis {
namespace {

float from_bits(uint32_t bits) {
  return std::bit_cast<float>(bits);
}
uint32_t to_bits(float x) {
  return std::bit_cast<uint32_t>(x);
}

bool is_f16_nan(uint16_t h) {
  return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0;
}

// The value of a finite f16 straight from the definition:
// (-1)^s * 2^-14 * m/1024 for e = 0, (-1)^s * 2^(e-15) * (1 + m/1024) otherwise.
double f16_oracle(uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double magnitude = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return s ? -magnitude : magnitude;
}

TEST(QuantHalf, DecodesEveryF16PatternAsTheDefinitionSays) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float x = f16_to_f32(bits);
    const int e = (h >> 10) & 0x1f;
    if (is_f16_nan(bits)) {
      ASSERT_TRUE(std::isnan(x)) << std::hex << h;
    } else if (e == 0x1f) {
      ASSERT_EQ(x, (h & 0x8000) ? -INFINITY : INFINITY) << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(x), f16_oracle(bits)) << std::hex << h;
      ASSERT_EQ(std::signbit(x), (h & 0x8000) != 0) << std::hex << h;
    }
  }
}

TEST(QuantHalf, EveryF16PatternRoundTripsThroughF32) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const uint16_t back = f32_to_f16(f16_to_f32(bits));
    if (is_f16_nan(bits)) {
      // NaN stays NaN with its sign; a quiet NaN (bit 9 set) comes back bit for bit.
      ASSERT_TRUE(is_f16_nan(back)) << std::hex << h;
      ASSERT_EQ(back & 0x8000, bits & 0x8000) << std::hex << h;
      if (bits & 0x0200) {
        ASSERT_EQ(back, bits) << std::hex << h;
      }
    } else {
      ASSERT_EQ(back, bits) << std::hex << h;
    }
  }
}

TEST(QuantHalf, F16KnownValues) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(0.5f), 0x3800);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);         // largest finite
  EXPECT_EQ(f32_to_f16(0x1p-14f), 0x0400);         // smallest normal
  EXPECT_EQ(f32_to_f16(0x1p-24f), 0x0001);         // smallest subnormal
  EXPECT_EQ(f32_to_f16(1023 * 0x1p-24f), 0x03ff);  // largest subnormal
  EXPECT_EQ(f32_to_f16(-3 * 0x1p-24f), 0x8003);
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x3555), 0x1.554p-2f);  // 0.333251953125
  EXPECT_EQ(f16_to_f32(0x0001), 0x1p-24f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
}

TEST(QuantHalf, F16RoundsToNearestTiesToEven) {
  // Between 1 (0x3c00) and 1 + 2^-10 (0x3c01) the halfway point is 1 + 2^-11.
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f), 0x3c00);             // tie, 0x3c00 is even
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f + 0x1p-23f), 0x3c01);  // just above the tie
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f - 0x1p-23f), 0x3c00);  // just below
  EXPECT_EQ(f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);         // tie between 0x3c01, 0x3c02
  EXPECT_EQ(f32_to_f16(-(1.0f + 3 * 0x1p-11f)), 0xbc02);
  // Rounding up across a binade: 2 - 2^-12 is the tie between 0x3fff and 0x4000 (2.0).
  EXPECT_EQ(f32_to_f16(2.0f - 0x1p-12f), 0x4000);
  // Subnormal ties: 2^-25 is halfway between 0 and 2^-24; 3 * 2^-25 between 1 and 2 units.
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000);
  EXPECT_EQ(f32_to_f16(-0x1p-25f), 0x8000);
  EXPECT_EQ(f32_to_f16(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(f32_to_f16(3 * 0x1p-25f), 0x0002);
  EXPECT_EQ(f32_to_f16(5 * 0x1p-25f), 0x0002);
  EXPECT_EQ(f32_to_f16(1023.5f * 0x1p-24f), 0x0400);  // tie, rounds up into the normals
  EXPECT_EQ(f32_to_f16(0x1p-30f), 0x0000);            // far below: flushes by rounding
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::denorm_min()), 0x0000);
}

TEST(QuantHalf, F16OverflowsToInfinity) {
  EXPECT_EQ(f32_to_f16(65519.996f), 0x7bff);  // below the tie at 65520
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);    // tie between 65504 (odd) and 2^16: inf
  EXPECT_EQ(f32_to_f16(-65520.0f), 0xfc00);
  EXPECT_EQ(f32_to_f16(1e10f), 0x7c00);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(f32_to_f16(INFINITY), 0x7c00);
  EXPECT_EQ(f32_to_f16(-INFINITY), 0xfc00);
  EXPECT_EQ(f16_to_f32(0x7c00), INFINITY);
  EXPECT_EQ(f16_to_f32(0xfc00), -INFINITY);
}

TEST(QuantHalf, F16NanStaysNan) {
  EXPECT_TRUE(is_f16_nan(f32_to_f16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(is_f16_nan(f32_to_f16(-std::numeric_limits<float>::quiet_NaN())));
  // A NaN whose payload lives only in the low 13 bits must not become inf.
  EXPECT_TRUE(is_f16_nan(f32_to_f16(from_bits(0x7f800001u))));
  EXPECT_TRUE(is_f16_nan(f32_to_f16(from_bits(0xff800fffu))));
  EXPECT_EQ(f32_to_f16(from_bits(0xff800fffu)) & 0x8000, 0x8000);
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7c01)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0xfe00)));
}

// Rounding against an oracle that knows nothing of bit tricks: the sorted list of all
// non-negative finite f16 values, with 2^16 standing in for inf (IEEE overflow behaves like a
// next value of 2^16 with an even code), and nearest-value search with ties to the even code.
class F16RoundingOracle {
 public:
  F16RoundingOracle() {
    for (uint32_t h = 0; h < 0x7c00; ++h) values_.push_back(f16_oracle(static_cast<uint16_t>(h)));
    values_.push_back(65536.0);  // code 0x7c00
  }
  uint16_t round(float x) const {
    const double a = std::fabs(static_cast<double>(x));
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    if (a >= 65536.0) return sign | 0x7c00;
    const auto above = std::lower_bound(values_.begin(), values_.end(), a);
    uint32_t code = static_cast<uint32_t>(above - values_.begin());
    if (*above != a) {
      const uint32_t below = code - 1;
      const double d_below = a - values_[below], d_above = *above - a;
      if (d_below < d_above || (d_below == d_above && below % 2 == 0)) code = below;
    }
    return static_cast<uint16_t>(sign | code);
  }

 private:
  std::vector<double> values_;  // values_[code] for codes 0 .. 0x7c00
};

TEST(QuantHalf, F16RoundingMatchesNearestValueOracle) {
  const F16RoundingOracle oracle;
  // Every halfway point between neighbouring codes, and one f32 ulp either side of it.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const double mid = (f16_oracle(static_cast<uint16_t>(h)) +
                        (h + 1 < 0x7c00 ? f16_oracle(static_cast<uint16_t>(h + 1)) : 65536.0)) /
                       2;
    const float x = static_cast<float>(mid);  // exact: a midpoint needs at most 12 bits
    ASSERT_EQ(static_cast<double>(x), mid);
    for (float y : {x, std::nextafter(x, 0.0f), std::nextafter(x, INFINITY), -x}) {
      ASSERT_EQ(f32_to_f16(y), oracle.round(y)) << "x = " << y;
    }
  }
  // Random f32 bit patterns across the whole finite range (biased toward f16's range).
  std::mt19937 rng(1234);
  std::uniform_int_distribution<uint32_t> any_bits;
  std::uniform_int_distribution<uint32_t> near_bits(0x32000000u, 0x47ffffffu);
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = (i % 2 == 0) ? any_bits(rng) : (near_bits(rng) | (any_bits(rng) & 0x80000000u));
    const float y = from_bits(bits);
    if (std::isnan(y)) continue;
    ASSERT_EQ(f32_to_f16(y), oracle.round(y)) << std::hex << bits;
  }
}

TEST(QuantHalf, Bf16KnownValues) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0x4049), 3.140625f);  // 2 * (1 + 73/128)
  EXPECT_EQ(bf16_to_f32(0x0001), from_bits(0x00010000u));
  // Ties to even at bit 16.
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f808000u)), 0x3f80);  // tie, 0x3f80 even
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f818000u)), 0x3f82);  // tie, 0x3f82 even
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f807fffu)), 0x3f80);
  // Subnormals round like everything else.
  EXPECT_EQ(f32_to_bf16(from_bits(0x00018000u)), 0x0002);
  EXPECT_EQ(f32_to_bf16(from_bits(0x00008000u)), 0x0000);
  EXPECT_EQ(f32_to_bf16(from_bits(0x80008001u)), 0x8001);
  // Overflow and inf.
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(f32_to_bf16(from_bits(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(f32_to_bf16(-INFINITY), 0xff80);
  // NaN stays NaN, also when the payload is only in the dropped bits.
  EXPECT_EQ(f32_to_bf16(from_bits(0x7fc00000u)), 0x7fc0);
  EXPECT_EQ(f32_to_bf16(from_bits(0x7f800001u)), 0x7fc0);
  EXPECT_EQ(f32_to_bf16(from_bits(0xff800001u)), 0xffc0);
}

TEST(QuantHalf, EveryBf16PatternRoundTripsThroughF32) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float x = bf16_to_f32(bits);
    ASSERT_EQ(to_bits(x), h << 16);
    const uint16_t back = f32_to_bf16(x);
    const bool nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
    if (nan) {
      ASSERT_TRUE(std::isnan(bf16_to_f32(back))) << std::hex << h;
      if (h & 0x40) {
        ASSERT_EQ(back, bits) << std::hex << h;
      }
    } else {
      ASSERT_EQ(back, bits) << std::hex << h;
    }
  }
}

}  // namespace
}  // namespace trellis
