// Scalar reference dequantization: one function per type, each a direct transcription of the
// element formulas in block_types.h. The order of the float operations is part of the contract
// (it is the format definition's order), so a SIMD kernel can reproduce the results bit for bit:
// legacy types compute q * d (+ m); K types first form the sub-block scale d * sc (and min
// dmin * mn), then scale * q (- min).
#include <cstdint>
#include <cstring>

#include "quant/block_types.h"
#include "quant/codecs.h"
#include "quant/half.h"

namespace trellis::quant_detail {
namespace {

// Reads the little-endian uint32 of high bits of a q5 block (4 bytes at an even offset).
uint32_t load_qh(const uint8_t* qh) {
  return static_cast<uint32_t>(qh[0]) | static_cast<uint32_t>(qh[1]) << 8 |
         static_cast<uint32_t>(qh[2]) << 16 | static_cast<uint32_t>(qh[3]) << 24;
}

}  // namespace

void dequantize_f32(const void* src, float* dst, int64_t n_blocks) {
  if (n_blocks > 0) std::memcpy(dst, src, static_cast<size_t>(n_blocks) * sizeof(float));
}

void dequantize_f16(const void* src, float* dst, int64_t n_blocks) {
  const auto* in = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n_blocks; ++i) dst[i] = f16_to_f32(in[i]);
}

void dequantize_bf16(const void* src, float* dst, int64_t n_blocks) {
  const auto* in = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n_blocks; ++i) dst[i] = bf16_to_f32(in[i]);
}

void dequantize_q4_0(const void* src, float* dst, int64_t n_blocks) {
  const auto* blocks = static_cast<const block_q4_0*>(src);
  for (int64_t b = 0; b < n_blocks; ++b, dst += kQk) {
    const float d = f16_to_f32(blocks[b].d);
    const uint8_t* qs = blocks[b].qs;
    for (int l = 0; l < kQk / 2; ++l) dst[l] = static_cast<float>((qs[l] & 0x0f) - 8) * d;
    for (int l = 0; l < kQk / 2; ++l) dst[l + kQk / 2] = static_cast<float>((qs[l] >> 4) - 8) * d;
  }
}

void dequantize_q4_1(const void* src, float* dst, int64_t n_blocks) {
  const auto* blocks = static_cast<const block_q4_1*>(src);
  for (int64_t b = 0; b < n_blocks; ++b, dst += kQk) {
    const float d = f16_to_f32(blocks[b].d);
    const float m = f16_to_f32(blocks[b].m);
    const uint8_t* qs = blocks[b].qs;
    for (int l = 0; l < kQk / 2; ++l) dst[l] = static_cast<float>(qs[l] & 0x0f) * d + m;
    for (int l = 0; l < kQk / 2; ++l) dst[l + kQk / 2] = static_cast<float>(qs[l] >> 4) * d + m;
  }
}

void dequantize_q5_0(const void* src, float* dst, int64_t n_blocks) {
  const auto* blocks = static_cast<const block_q5_0*>(src);
  for (int64_t b = 0; b < n_blocks; ++b, dst += kQk) {
    const float d = f16_to_f32(blocks[b].d);
    const uint32_t qh = load_qh(blocks[b].qh);
    const uint8_t* qs = blocks[b].qs;
    // Bit l of qh completes element l, bit l + 16 completes element l + 16.
    for (int l = 0; l < kQk / 2; ++l) {
      const int hi = static_cast<int>((qh >> l) & 1u) << 4;
      dst[l] = static_cast<float>(((qs[l] & 0x0f) | hi) - 16) * d;
    }
    for (int l = 0; l < kQk / 2; ++l) {
      const int hi = static_cast<int>((qh >> (l + kQk / 2)) & 1u) << 4;
      dst[l + kQk / 2] = static_cast<float>(((qs[l] >> 4) | hi) - 16) * d;
    }
  }
}

void dequantize_q5_1(const void* src, float* dst, int64_t n_blocks) {
  const auto* blocks = static_cast<const block_q5_1*>(src);
  for (int64_t b = 0; b < n_blocks; ++b, dst += kQk) {
    const float d = f16_to_f32(blocks[b].d);
    const float m = f16_to_f32(blocks[b].m);
    const uint32_t qh = load_qh(blocks[b].qh);
    const uint8_t* qs = blocks[b].qs;
    for (int l = 0; l < kQk / 2; ++l) {
      const int hi = static_cast<int>((qh >> l) & 1u) << 4;
      dst[l] = static_cast<float>((qs[l] & 0x0f) | hi) * d + m;
    }
    for (int l = 0; l < kQk / 2; ++l) {
      const int hi = static_cast<int>((qh >> (l + kQk / 2)) & 1u) << 4;
      dst[l + kQk / 2] = static_cast<float>((qs[l] >> 4) | hi) * d + m;
    }
  }
}

void dequantize_q8_0(const void* src, float* dst, int64_t n_blocks) {
  const auto* blocks = static_cast<const block_q8_0*>(src);
  for (int64_t b = 0; b < n_blocks; ++b, dst += kQk) {
    const float d = f16_to_f32(blocks[b].d);
    for (int l = 0; l < kQk; ++l) dst[l] = static_cast<float>(blocks[b].qs[l]) * d;
  }
}

// q2_K super-block, two halves of 128 values; in half h (qs += 32h), quarter k, lane l:
//   dst   | 32k + l, l = 0..15           | 32k + l, l = 16..31
//   code  | (qs[l] >> 2k) & 3            | (qs[l] >> 2k) & 3
//   scale | scales[8h + 2k]              | scales[8h + 2k + 1]
void dequantize_q2_k(const void* src, float* dst, int64_t n_blocks) {
  const auto* blocks = static_cast<const block_q2_K*>(src);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = f16_to_f32(blocks[b].d);
    const float dmin = f16_to_f32(blocks[b].dmin);
    for (int h = 0; h < 2; ++h, dst += 128) {
      const uint8_t* qs = blocks[b].qs + 32 * h;
      for (int k = 0; k < 4; ++k) {
        for (int half_run = 0; half_run < 2; ++half_run) {
          const uint8_t sc = blocks[b].scales[8 * h + 2 * k + half_run];
          const float scale = d * static_cast<float>(sc & 0x0f);
          const float min = dmin * static_cast<float>(sc >> 4);
          for (int l = 16 * half_run; l < 16 * half_run + 16; ++l) {
            dst[32 * k + l] = scale * static_cast<float>((qs[l] >> (2 * k)) & 3) - min;
          }
        }
      }
    }
  }
}

// q3_K: the q2_K arrangement of the low 2 bits; bit (4h + k) of hmask[l] clear subtracts 4.
void dequantize_q3_k(const void* src, float* dst, int64_t n_blocks) {
  const auto* blocks = static_cast<const block_q3_K*>(src);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = f16_to_f32(blocks[b].d);
    const uint8_t* hmask = blocks[b].hmask;
    for (int h = 0; h < 2; ++h, dst += 128) {
      const uint8_t* qs = blocks[b].qs + 32 * h;
      for (int k = 0; k < 4; ++k) {
        const int bit = 4 * h + k;
        for (int half_run = 0; half_run < 2; ++half_run) {
          const int s = unpack_q3_k_scale(blocks[b].scales, 8 * h + 2 * k + half_run);
          const float scale = d * static_cast<float>(s - 32);
          for (int l = 16 * half_run; l < 16 * half_run + 16; ++l) {
            const int q = ((qs[l] >> (2 * k)) & 3) - (((hmask[l] >> bit) & 1) ? 0 : 4);
            dst[32 * k + l] = scale * static_cast<float>(q);
          }
        }
      }
    }
  }
}

// q4_K super-block, 256 values in 4 chunks of 64 (c = 0..3), each chunk two sub-blocks:
//   dst  | 0 .. 31           | 32 .. 63          | 64 .. 95            | ... | 224 .. 255
//   code | qs[0..32) & 0xf   | qs[0..32) >> 4    | qs[32..64) & 0xf    | ... | qs[96..128) >> 4
//   sub  | 0                 | 1                 | 2                   | ... | 7
void dequantize_q4_k(const void* src, float* dst, int64_t n_blocks) {
  const auto* blocks = static_cast<const block_q4_K*>(src);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = f16_to_f32(blocks[b].d);
    const float dmin = f16_to_f32(blocks[b].dmin);
    const uint8_t* qs = blocks[b].qs;
    for (int c = 0; c < 4; ++c, qs += 32) {
      const KScaleMin lo = unpack_k_scale_min(blocks[b].scales, 2 * c);
      const KScaleMin hi = unpack_k_scale_min(blocks[b].scales, 2 * c + 1);
      const float scale_lo = d * lo.scale, min_lo = dmin * lo.min;
      const float scale_hi = d * hi.scale, min_hi = dmin * hi.min;
      for (int l = 0; l < 32; ++l) dst[l] = scale_lo * static_cast<float>(qs[l] & 0x0f) - min_lo;
      for (int l = 0; l < 32; ++l) dst[l + 32] = scale_hi * static_cast<float>(qs[l] >> 4) - min_hi;
      dst += 64;
    }
  }
}

// q5_K: the q4_K layout, plus bit (2c) / (2c + 1) of qh[l] as bit 4 of the low / high sub-block.
void dequantize_q5_k(const void* src, float* dst, int64_t n_blocks) {
  const auto* blocks = static_cast<const block_q5_K*>(src);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = f16_to_f32(blocks[b].d);
    const float dmin = f16_to_f32(blocks[b].dmin);
    const uint8_t* qs = blocks[b].qs;
    const uint8_t* qh = blocks[b].qh;
    for (int c = 0; c < 4; ++c, qs += 32) {
      const KScaleMin lo = unpack_k_scale_min(blocks[b].scales, 2 * c);
      const KScaleMin hi = unpack_k_scale_min(blocks[b].scales, 2 * c + 1);
      const float scale_lo = d * lo.scale, min_lo = dmin * lo.min;
      const float scale_hi = d * hi.scale, min_hi = dmin * hi.min;
      for (int l = 0; l < 32; ++l) {
        const int q = (qs[l] & 0x0f) | (((qh[l] >> (2 * c)) & 1) << 4);
        dst[l] = scale_lo * static_cast<float>(q) - min_lo;
      }
      for (int l = 0; l < 32; ++l) {
        const int q = (qs[l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4);
        dst[l + 32] = scale_hi * static_cast<float>(q) - min_hi;
      }
      dst += 64;
    }
  }
}

// q6_K super-block, two halves of 128 values; in half h (ql += 64h, qh += 32h), lane l = 0..31:
//   dst       | l                | l + 32              | l + 64           | l + 96
//   low bits  | ql[l] & 0xf      | ql[l + 32] & 0xf    | ql[l] >> 4       | ql[l + 32] >> 4
//   high bits | qh[l] bits 1:0   | qh[l] bits 3:2      | qh[l] bits 5:4   | qh[l] bits 7:6
//   scale     | scales[(128h + dst index) / 16]
void dequantize_q6_k(const void* src, float* dst, int64_t n_blocks) {
  const auto* blocks = static_cast<const block_q6_K*>(src);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = f16_to_f32(blocks[b].d);
    const int8_t* scales = blocks[b].scales;
    for (int h = 0; h < 2; ++h, dst += 128, scales += 8) {
      const uint8_t* ql = blocks[b].ql + 64 * h;
      const uint8_t* qh = blocks[b].qh + 32 * h;
      for (int quarter = 0; quarter < 4; ++quarter) {
        const uint8_t* low = ql + 32 * (quarter & 1);
        const int low_shift = quarter < 2 ? 0 : 4;
        const int high_shift = 2 * quarter;
        for (int half_run = 0; half_run < 2; ++half_run) {  // two runs of 16 share a scale
          const float scale = d * static_cast<float>(scales[2 * quarter + half_run]);
          for (int l = 16 * half_run; l < 16 * half_run + 16; ++l) {
            const int q = ((low[l] >> low_shift) & 0x0f) | (((qh[l] >> high_shift) & 3) << 4);
            dst[32 * quarter + l] = scale * static_cast<float>(q - 32);
          }
        }
      }
    }
  }
}

}  // namespace trellis::quant_detail
