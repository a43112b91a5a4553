// Scalar reference quantization. Each routine follows the format's reference definition
// (the reference quantizers that define the bytes of GGUF files), including the order of its
// float operations, so the bytes match the reference's (given IEEE f32 without FMA contraction):
//
//   q8_0: d = amax / 127;               q = roundf(x * (1/d))
//   q4_0: d = max / -8  (max: the value of largest magnitude, sign kept, first one wins);
//         q = min(15, trunc(x * (1/d) + 8.5))
//   q5_0: d = max / -16;                q = min(31, trunc(x * (1/d) + 16.5))
//   q4_1: d = (max - min) / 15, m = min; q = min(15, trunc((x - min) * (1/d) + 0.5))
//   q5_1: d = (max - min) / 31, m = min; q = trunc((x - min) * (1/d) + 0.5)
//
// The codes are computed with the f32 scale d, before it is rounded to the stored f16. A block
// whose scale is 0 (all zeros, or all equal for q4_1 / q5_1) stores d = 0 (-0, f16 0x8000, for
// q4_0 / q5_0, since 0 / -8 = -0) and uses 1/d := 0, so no division by zero and no NaN.
// Precondition: inputs are finite.
//
// The K types (q2_K .. q6_K) are quantized in quantize_k.cpp by a round-to-nearest search of the
// scales: their bytes are valid GGUF blocks but not the reference quantizer's bytes.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "quant/block_types.h"
#include "quant/codecs.h"
#include "quant/half.h"
#include "quant/rounding.h"

namespace trellis::quant_detail {
namespace {

float inverse_or_zero(float d) {
  return d != 0.0f ? 1.0f / d : 0.0f;
}

// The codes of a q4_0 / q5_0 block (n_half = 8 / 16) into q[kQk]; returns the f32 scale
// d = max / -n_half. x * id lies in [-n_half, n_half] (up to rounding), so x * id + n_half + 0.5
// truncates to 0 .. 2 n_half; the top is clamped to 2 n_half - 1.
float signed_codes(const float* x, int n_half, int* q) {
  const float d = signed_absmax(x, kQk) / -static_cast<float>(n_half);
  const float id = inverse_or_zero(d);
  const float offset = static_cast<float>(n_half) + 0.5f;
  for (int l = 0; l < kQk; ++l)
    q[l] = std::min(2 * n_half - 1, static_cast<int>(static_cast<int8_t>(x[l] * id + offset)));
  return d;
}

// The f32 scale and offset of a q4_1 / q5_1 block.
struct Range {
  float d;
  float min;
};

// The codes of a q4_1 / q5_1 block (n_max = 15 / 31) into q[kQk], unclamped: (x - min) * id lies
// in [0, n_max], so + 0.5 truncates to 0 .. n_max + 1 (the top only through rounding noise).
Range range_codes(const float* x, int n_max, int* q) {
  float min = FLT_MAX;
  float max = -FLT_MAX;
  for (int l = 0; l < kQk; ++l) {
    if (x[l] < min) min = x[l];
    if (x[l] > max) max = x[l];
  }
  const float d = (max - min) / static_cast<float>(n_max);
  const float id = inverse_or_zero(d);
  for (int l = 0; l < kQk; ++l) q[l] = static_cast<uint8_t>((x[l] - min) * id + 0.5f);
  return {d, min};
}

}  // namespace

void store_nibbles(const int* q, uint8_t* qs) {
  for (int l = 0; l < kQk / 2; ++l)
    qs[l] = static_cast<uint8_t>((q[l] & 0x0f) | ((q[l + kQk / 2] & 0x0f) << 4));
}

void store_five_bits(const int* q, uint8_t* qs, uint8_t* qh) {
  store_nibbles(q, qs);
  uint32_t bits = 0;
  for (int l = 0; l < kQk; ++l) bits |= static_cast<uint32_t>((q[l] >> 4) & 1) << l;
  for (int k = 0; k < 4; ++k) qh[k] = static_cast<uint8_t>(bits >> (8 * k));
}

void quantize_f32(const float* src, void* dst, int64_t n_blocks) {
  if (n_blocks > 0) std::memcpy(dst, src, static_cast<size_t>(n_blocks) * sizeof(float));
}

void quantize_f16(const float* src, void* dst, int64_t n_blocks) {
  auto* out = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n_blocks; ++i) out[i] = f32_to_f16(src[i]);
}

void quantize_bf16(const float* src, void* dst, int64_t n_blocks) {
  auto* out = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n_blocks; ++i) out[i] = f32_to_bf16(src[i]);
}

void quantize_q8_0(const float* src, void* dst, int64_t n_blocks) {
  auto* blocks = static_cast<block_q8_0*>(dst);
  for (int64_t b = 0; b < n_blocks; ++b, src += kQk) {
    float amax = 0.0f;
    for (int l = 0; l < kQk; ++l) amax = std::max(amax, std::fabs(src[l]));
    const float d = amax / 127.0f;
    const float id = inverse_or_zero(d);
    blocks[b].d = f32_to_f16(d);
    // |x * id| <= 127 up to one rounding, so roundf lands in [-127, 127].
    for (int l = 0; l < kQk; ++l)
      blocks[b].qs[l] = static_cast<int8_t>(round_half_away_from_zero(src[l] * id));
  }
}

void quantize_q4_0(const float* src, void* dst, int64_t n_blocks) {
  auto* blocks = static_cast<block_q4_0*>(dst);
  for (int64_t b = 0; b < n_blocks; ++b, src += kQk) {
    int q[kQk];
    blocks[b].d = f32_to_f16(signed_codes(src, 8, q));
    store_nibbles(q, blocks[b].qs);
  }
}

void quantize_q4_1(const float* src, void* dst, int64_t n_blocks) {
  auto* blocks = static_cast<block_q4_1*>(dst);
  for (int64_t b = 0; b < n_blocks; ++b, src += kQk) {
    int q[kQk];
    const Range range = range_codes(src, 15, q);
    blocks[b].d = f32_to_f16(range.d);
    blocks[b].m = f32_to_f16(range.min);
    for (int& code : q) code = std::min(15, code);  // 16 from rounding noise
    store_nibbles(q, blocks[b].qs);
  }
}

void quantize_q5_0(const float* src, void* dst, int64_t n_blocks) {
  auto* blocks = static_cast<block_q5_0*>(dst);
  for (int64_t b = 0; b < n_blocks; ++b, src += kQk) {
    int q[kQk];
    blocks[b].d = f32_to_f16(signed_codes(src, 16, q));
    store_five_bits(q, blocks[b].qs, blocks[b].qh);
  }
}

// The definition has no clamp for q5_1: a code of 32 (rounding noise) keeps its low 5 bits.
void quantize_q5_1(const float* src, void* dst, int64_t n_blocks) {
  auto* blocks = static_cast<block_q5_1*>(dst);
  for (int64_t b = 0; b < n_blocks; ++b, src += kQk) {
    int q[kQk];
    const Range range = range_codes(src, 31, q);
    blocks[b].d = f32_to_f16(range.d);
    blocks[b].m = f32_to_f16(range.min);
    store_five_bits(q, blocks[b].qs, blocks[b].qh);
  }
}

}  // namespace trellis::quant_detail
