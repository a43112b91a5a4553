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

// Writes the little-endian uint32 of high bits of a q5 block.
void store_qh(uint32_t qh, uint8_t* out) {
  for (int k = 0; k < 4; ++k) out[k] = static_cast<uint8_t>(qh >> (8 * k));
}

}  // namespace

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
    const float d = signed_absmax(src, kQk) / -8.0f;
    const float id = inverse_or_zero(d);
    blocks[b].d = f32_to_f16(d);
    // x * id lies in [-8, 8] (up to rounding), so x * id + 8.5 truncates to 0..16; clamp 16.
    for (int l = 0; l < kQk / 2; ++l) {
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(src[l] * id + 8.5f)));
      const int q1 =
          std::min(15, static_cast<int>(static_cast<int8_t>(src[l + kQk / 2] * id + 8.5f)));
      blocks[b].qs[l] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quantize_q4_1(const float* src, void* dst, int64_t n_blocks) {
  auto* blocks = static_cast<block_q4_1*>(dst);
  for (int64_t b = 0; b < n_blocks; ++b, src += kQk) {
    float min = FLT_MAX;
    float max = -FLT_MAX;
    for (int l = 0; l < kQk; ++l) {
      if (src[l] < min) min = src[l];
      if (src[l] > max) max = src[l];
    }
    const float d = (max - min) / 15.0f;
    const float id = inverse_or_zero(d);
    blocks[b].d = f32_to_f16(d);
    blocks[b].m = f32_to_f16(min);
    // (x - min) * id lies in [0, 15], so + 0.5 truncates to 0..15 (clamped for rounding noise).
    for (int l = 0; l < kQk / 2; ++l) {
      const int q0 =
          std::min(15, static_cast<int>(static_cast<int8_t>((src[l] - min) * id + 0.5f)));
      const int q1 =
          std::min(15, static_cast<int>(static_cast<int8_t>((src[l + kQk / 2] - min) * id + 0.5f)));
      blocks[b].qs[l] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quantize_q5_0(const float* src, void* dst, int64_t n_blocks) {
  auto* blocks = static_cast<block_q5_0*>(dst);
  for (int64_t b = 0; b < n_blocks; ++b, src += kQk) {
    const float d = signed_absmax(src, kQk) / -16.0f;
    const float id = inverse_or_zero(d);
    blocks[b].d = f32_to_f16(d);
    uint32_t qh = 0;
    for (int l = 0; l < kQk / 2; ++l) {
      const int q0 = std::min(31, static_cast<int>(static_cast<int8_t>(src[l] * id + 16.5f)));
      const int q1 =
          std::min(31, static_cast<int>(static_cast<int8_t>(src[l + kQk / 2] * id + 16.5f)));
      blocks[b].qs[l] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= static_cast<uint32_t>(q0 >> 4) << l;
      qh |= static_cast<uint32_t>(q1 >> 4) << (l + kQk / 2);
    }
    store_qh(qh, blocks[b].qh);
  }
}

void quantize_q5_1(const float* src, void* dst, int64_t n_blocks) {
  auto* blocks = static_cast<block_q5_1*>(dst);
  for (int64_t b = 0; b < n_blocks; ++b, src += kQk) {
    float min = FLT_MAX;
    float max = -FLT_MAX;
    for (int l = 0; l < kQk; ++l) {
      if (src[l] < min) min = src[l];
      if (src[l] > max) max = src[l];
    }
    const float d = (max - min) / 31.0f;
    const float id = inverse_or_zero(d);
    blocks[b].d = f32_to_f16(d);
    blocks[b].m = f32_to_f16(min);
    uint32_t qh = 0;
    // The definition has no clamp here: (x - min) * id + 0.5 stays below 32 for finite inputs;
    // only the low 5 bits are stored either way.
    for (int l = 0; l < kQk / 2; ++l) {
      const int q0 = static_cast<uint8_t>((src[l] - min) * id + 0.5f);
      const int q1 = static_cast<uint8_t>((src[l + kQk / 2] - min) * id + 0.5f);
      blocks[b].qs[l] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= static_cast<uint32_t>((q0 >> 4) & 1) << l;
      qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (l + kQk / 2);
    }
    store_qh(qh, blocks[b].qh);
  }
}

}  // namespace trellis::quant_detail
