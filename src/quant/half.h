// Bit-exact conversions between f32 and the two 16-bit float formats of GGUF tensors:
// IEEE 754 binary16 ("f16": 1 sign, 5 exponent, 10 mantissa bits) and bfloat16 ("bf16": the top
// half of an f32: 1 sign, 8 exponent, 7 mantissa bits). Values travel as raw uint16_t bits.
//
// Rounding is IEEE round-to-nearest, ties to even, in both narrowing directions; subnormals are
// kept (never flushed); NaN stays NaN. For every non-NaN input these are also the results of x86
// F16C `vcvtps2ph` (imm8 = 0) and `vcvtph2ps`, so SIMD kernels can be compared bit for bit.
// Defined inline: the dequantizers call them once per block and the f16/bf16 rows once per value.
#pragma once

#include <bit>
#include <cstdint>

namespace trellis {

// `condition ? a : b` through a bit mask. The conversions below compute every case and select one
// this way, so that loops over rows compile to branch-free, vectorizable code (a plain ?: around
// float arithmetic is kept as a branch, since the float operation may not be speculated).
namespace half_detail {
inline uint32_t select_bits(bool condition, uint32_t a, uint32_t b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(condition);
  return (a & mask) | (b & ~mask);
}
}  // namespace half_detail

// Exact (every f16 value is an f32 value). A NaN keeps its payload bits at the top of the f32
// mantissa, so a quiet NaN survives f16 -> f32 -> f16 unchanged.
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = h & 0x7c00u;
  // Exponent and mantissa moved to their f32 positions; the exponent is still biased by 15.
  const uint32_t shifted = static_cast<uint32_t>(h & 0x7fffu) << 13;
  const uint32_t normal = shifted + (112u << 23);  // rebias 15 -> 127
  const uint32_t inf_nan = shifted | 0x7f800000u;  // exponent 31 -> 255, mantissa kept
  // Zero and subnormals are mantissa * 2^-24, exact in f32 since mantissa < 2^10.
  const uint32_t subnormal = std::bit_cast<uint32_t>(static_cast<float>(h & 0x3ffu) * 0x1p-24f);
  const uint32_t magnitude =
      half_detail::select_bits(exponent == 0x7c00u, inf_nan,  //
                               half_detail::select_bits(exponent == 0, subnormal, normal));
  return std::bit_cast<float>(sign | magnitude);
}

// Rounds to nearest, ties to even. |x| >= 65520 (halfway between the largest f16, 65504, and
// 2^16) becomes inf; |x| <= 2^-25 (half the smallest subnormal) becomes a signed zero.
// A NaN becomes a quiet NaN (bit 9 set) keeping the top 9 payload bits and the sign.
inline uint16_t f32_to_f16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t magnitude = bits & 0x7fffffffu;
  // NaN: quiet bit set, so a payload only in the dropped low bits cannot turn it into inf.
  const uint32_t nan = 0x7e00u | ((magnitude >> 13) & 0x3ffu);
  // [2^-14, 2^16): an f16 normal. Drop the low 13 mantissa bits rounding to nearest even: adding
  // 0xfff rounds up anything above the halfway point and the kept lowest bit breaks the tie. A
  // carry out of the mantissa correctly bumps the exponent (65520 -> 0x7c00, inf). Then rebias
  // 127 -> 15. (Wraps harmlessly, unsigned, when magnitude is outside this range.)
  const uint32_t normal = (magnitude + 0xfffu + ((magnitude >> 13) & 1u) - (112u << 23)) >> 13;
  // [0, 2^-14): an f16 subnormal q * 2^-24 (q = 0x400 is the smallest normal, correctly encoded).
  // In 0.5f + |x| the f32 ulp is 2^-24, so the hardware addition rounds |x| to a multiple of
  // 2^-24, to nearest even, which is exactly q; q is then the low bits of the sum.
  const uint32_t subnormal =
      std::bit_cast<uint32_t>(std::bit_cast<float>(magnitude) + 0.5f) - 0x3f000000u;
  const uint32_t result = half_detail::select_bits(
      magnitude > 0x7f800000u, nan,
      half_detail::select_bits(
          magnitude >= 0x47800000u, 0x7c00u,  // >= 2^16 or inf: overflow
          half_detail::select_bits(magnitude >= 0x38800000u, normal, subnormal)));
  return static_cast<uint16_t>(sign | result);
}

// Exact: bf16 is the top half of an f32.
inline float bf16_to_f32(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

// Rounds to nearest, ties to even; overflow rounds to inf as IEEE says. Subnormals are rounded like
// any other value (not flushed to zero). A NaN is truncated and quieted (bit 6 set), so it can
// never turn into inf.
inline uint16_t f32_to_bf16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t nan = (bits >> 16) | 0x40u;
  // Adding 0x7fff rounds up above the halfway point; the kept lowest bit breaks ties. No overflow
  // of uint32_t: the largest finite magnitude plus 0x8000 stays below 2^32 even with the sign.
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>(
      half_detail::select_bits((bits & 0x7fffffffu) > 0x7f800000u, nan, rounded));
}

}  // namespace trellis
