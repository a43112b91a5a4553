// NEON (AArch64 Advanced SIMD) matmul for the K super-block types (Q2_K .. Q6_K) against
// activations quantized to ActQ8_K: contract case 3 of matmul_internal.h, bit-identical to the
// scalar reference. Each super-block's integer sums are exact (the order of integer additions is
// free, and the bounds below keep every intermediate in range), then folded into one float
// accumulator with exactly the scalar reference's float operations, in its order.
//
// A row's super-block is first decoded into sixteen registers of 16 signed codes (register 2g + s
// holds elements [32g + 16s, 32g + 16s + 16) of group g, lane l = element 32g + 16s + l) and int32
// scale vectors, so the decode is shared by all the tokens of a tile.
//
// Like matmul_neon.cpp, only baseline ARMv8.0 instructions: vmull_s8 / vmlal_s8 products in int16,
// then pairwise widening adds (SDOT is optional hardware, left for later).
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/arm/kernels_neon.h"
#include "kernels/arm/neon_util.h"
#include "kernels/matmul_internal.h"
#include "kernels/tiling.h"
#include "quant/block_types.h"
#include "quant/half.h"

namespace trellis::kernels_detail::neon {
namespace {

// ActQ8_K: d @0, bsums[16] (int16) @4, qs[256] @36.
static_assert(offsetof(ActQ8_K, bsums) == 4 && offsetof(ActQ8_K, qs) == 36);
constexpr size_t kActBytes = sizeof(ActQ8_K);

// A decoded super-block of one weight row.
struct SuperBlock {
  int8x16_t q[16];     // q[2g + s]: elements 32g + 16s + l, l = 0..15 (see each type for values)
  int32x4_t scale[4];  // the integer multipliers of the partial sums (see each type)
  int16x8_t mins[2];   // the multipliers of the activation sums (see each type; zero if none)
  float d;
  float dmin;
};

// q4_K: d @0, dmin @2, scales[12] @4, qs[128] @16. q5_K: the same, with qh[32] @16, qs @48.
// Group j is sub-block j: codes = low (j even) / high (j odd) nibbles of qs[32 (j/2) + l], plus for
// q5_K bit j of qh[l] as bit 4 (codes 0..31). scale[0] = sc_0..sc_3, scale[1] = sc_4..sc_7.
template <bool kFiveBit>
struct DecQ45K {
  static constexpr size_t kBytes = kFiveBit ? 176 : 144;
  static void decode(const uint8_t* p, SuperBlock& sb) {
    sb.d = f16_to_f32(load_u16(p));
    sb.dmin = f16_to_f32(load_u16(p + 2));
    int32_t sc[8];
    int16_t mn[8];
    for (int j = 0; j < 8; ++j) {
      const KScaleMin sm = unpack_k_scale_min(p + 4, j);
      sc[j] = sm.scale;
      mn[j] = sm.min;
    }
    sb.scale[0] = vld1q_s32(sc);
    sb.scale[1] = vld1q_s32(sc + 4);
    sb.scale[2] = sb.scale[3] = vdupq_n_s32(0);
    sb.mins[0] = vld1q_s16(mn);
    sb.mins[1] = vdupq_n_s16(0);
    const uint8_t* qs = p + (kFiveBit ? 48 : 16);
    const uint8x16_t low4 = vdupq_n_u8(0x0f);
    for (int c = 0; c < 4; ++c) {
      for (int s = 0; s < 2; ++s) {
        const uint8x16_t bytes = vld1q_u8(qs + 32 * c + 16 * s);
        uint8x16_t lo = vandq_u8(bytes, low4);  // group 2c
        uint8x16_t hi = vshrq_n_u8(bytes, 4);   // group 2c + 1
        if constexpr (kFiveBit) {
          // vtstq: 0xff where bit j of qh[16s + l] is set; masked to the value 16 (bit 4).
          const uint8x16_t qh = vld1q_u8(p + 16 + 16 * s);
          const uint8x16_t sixteen = vdupq_n_u8(16);
          const auto bit_lo = static_cast<uint8_t>(1u << (2 * c));
          const auto bit_hi = static_cast<uint8_t>(1u << (2 * c + 1));
          lo = vorrq_u8(lo, vandq_u8(vtstq_u8(qh, vdupq_n_u8(bit_lo)), sixteen));
          hi = vorrq_u8(hi, vandq_u8(vtstq_u8(qh, vdupq_n_u8(bit_hi)), sixteen));
        }
        sb.q[2 * (2 * c) + s] = vreinterpretq_s8_u8(lo);
        sb.q[2 * (2 * c + 1) + s] = vreinterpretq_s8_u8(hi);
      }
    }
  }
};

// q6_K: ql[128] @0, qh[64] @128, scales[16] (int8) @192, d @208. Group g = 4h + k (half h,
// quarter k): low 4 bits from ql[64h + 32 (k & 1) + l] (low nibble for k < 2, high for k >= 2),
// bits 4-5 from (qh[32h + l] >> 2k) & 3; the decoded codes are q - 32 (-32..31). Register 2g + s
// is exactly run 2g + s, whose scale is scales[2g + s]; scale[m] = scales[4m .. 4m + 3] in int32.
// (q2_K and q3_K below share this group / run arrangement.)
struct DecQ6K {
  static constexpr size_t kBytes = 210;
  static void decode(const uint8_t* p, SuperBlock& sb) {
    sb.d = f16_to_f32(load_u16(p + 208));
    sb.dmin = 0.0f;
    const uint8x16_t low4 = vdupq_n_u8(0x0f);
    const uint8x16_t two_bits = vdupq_n_u8(0x30);
    const int8x16_t thirty_two = vdupq_n_s8(32);
    for (int h = 0; h < 2; ++h) {
      for (int s = 0; s < 2; ++s) {
        const uint8x16_t ql0 = vld1q_u8(p + 64 * h + 16 * s);       // quarters 0 and 2
        const uint8x16_t ql1 = vld1q_u8(p + 64 * h + 32 + 16 * s);  // quarters 1 and 3
        const uint8x16_t qh = vld1q_u8(p + 128 + 32 * h + 16 * s);
        const uint8x16_t q[4] = {
            vorrq_u8(vandq_u8(ql0, low4), vandq_u8(vshlq_n_u8(qh, 4), two_bits)),
            vorrq_u8(vandq_u8(ql1, low4), vandq_u8(vshlq_n_u8(qh, 2), two_bits)),
            vorrq_u8(vshrq_n_u8(ql0, 4), vandq_u8(qh, two_bits)),
            vorrq_u8(vshrq_n_u8(ql1, 4), vandq_u8(vshrq_n_u8(qh, 2), two_bits)),
        };
        for (int k = 0; k < 4; ++k) {
          sb.q[2 * (4 * h + k) + s] = vsubq_s8(vreinterpretq_s8_u8(q[k]), thirty_two);
        }
      }
    }
    const int8x16_t scales = vreinterpretq_s8_u8(vld1q_u8(p + 192));
    const int16x8_t s16_lo = vmovl_s8(vget_low_s8(scales));  // scales 0..7
    const int16x8_t s16_hi = vmovl_high_s8(scales);          // scales 8..15
    sb.scale[0] = vmovl_s16(vget_low_s16(s16_lo));
    sb.scale[1] = vmovl_high_s16(s16_lo);
    sb.scale[2] = vmovl_s16(vget_low_s16(s16_hi));
    sb.scale[3] = vmovl_high_s16(s16_hi);
    sb.mins[0] = sb.mins[1] = vdupq_n_s16(0);
  }
};

// The 2-bit codes of half s of group g = 4h + k of a q2_K / q3_K super-block whose qs[64] start at
// qs: (qs[32h + 16s + l] >> 2k) & 3, for k = 0..3 in out[0..3].
inline void low2_codes(const uint8_t* qs, int h, int s, uint8x16_t* out) {
  const uint8x16_t bytes = vld1q_u8(qs + 32 * h + 16 * s);
  const uint8x16_t three = vdupq_n_u8(3);
  out[0] = vandq_u8(bytes, three);
  out[1] = vandq_u8(vshrq_n_u8(bytes, 2), three);
  out[2] = vandq_u8(vshrq_n_u8(bytes, 4), three);
  out[3] = vshrq_n_u8(bytes, 6);
}

// q2_K: scales[16] @0, qs[64] @16, d @80, dmin @82. Codes 0..3 (low2_codes); run k has scale
// scales[k] & 0xf and min scales[k] >> 4: scale[m] = the scales of runs 4m .. 4m + 3 in int32,
// mins[0] / mins[1] = the mins of runs 0..7 / 8..15 in int16.
struct DecQ2K {
  static constexpr size_t kBytes = 84;
  static void decode(const uint8_t* p, SuperBlock& sb) {
    sb.d = f16_to_f32(load_u16(p + 80));
    sb.dmin = f16_to_f32(load_u16(p + 82));
    for (int h = 0; h < 2; ++h) {
      for (int s = 0; s < 2; ++s) {
        uint8x16_t q[4];
        low2_codes(p + 16, h, s, q);
        for (int k = 0; k < 4; ++k) sb.q[2 * (4 * h + k) + s] = vreinterpretq_s8_u8(q[k]);
      }
    }
    const uint8x16_t packed = vld1q_u8(p);
    const uint8x16_t scales = vandq_u8(packed, vdupq_n_u8(0x0f));
    const uint8x16_t mins = vshrq_n_u8(packed, 4);
    const int16x8_t s16_lo = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(scales)));  // runs 0..7
    const int16x8_t s16_hi = vreinterpretq_s16_u16(vmovl_high_u8(scales));          // runs 8..15
    sb.scale[0] = vmovl_s16(vget_low_s16(s16_lo));
    sb.scale[1] = vmovl_high_s16(s16_lo);
    sb.scale[2] = vmovl_s16(vget_low_s16(s16_hi));
    sb.scale[3] = vmovl_high_s16(s16_hi);
    sb.mins[0] = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mins)));
    sb.mins[1] = vreinterpretq_s16_u16(vmovl_high_u8(mins));
  }
};

// q3_K: hmask[32] @0, qs[64] @32, scales[12] @96, d @108. Codes low2 - 4 where bit (4h + k) of
// hmask[16s + l] is clear, low2 where it is set (-4..3); run k has scale unpack_q3_k_scale - 32:
// scale[m] = runs 4m .. 4m + 3 in int32.
struct DecQ3K {
  static constexpr size_t kBytes = 110;
  static void decode(const uint8_t* p, SuperBlock& sb) {
    sb.d = f16_to_f32(load_u16(p + 108));
    sb.dmin = 0.0f;
    const uint8x16_t four = vdupq_n_u8(4);
    for (int h = 0; h < 2; ++h) {
      for (int s = 0; s < 2; ++s) {
        uint8x16_t q[4];
        low2_codes(p + 32, h, s, q);
        const uint8x16_t hm = vld1q_u8(p + 16 * s);
        for (int k = 0; k < 4; ++k) {
          // vtstq: 0xff where the bit is set; vbicq keeps 4 only where it is clear.
          const auto bit = static_cast<uint8_t>(1u << (4 * h + k));
          const uint8x16_t minus = vbicq_u8(four, vtstq_u8(hm, vdupq_n_u8(bit)));
          sb.q[2 * (4 * h + k) + s] =
              vsubq_s8(vreinterpretq_s8_u8(q[k]), vreinterpretq_s8_u8(minus));
        }
      }
    }
    int32_t sc[16];
    for (int k = 0; k < 16; ++k) sc[k] = unpack_q3_k_scale(p + 96, k) - 32;
    for (int m = 0; m < 4; ++m) sb.scale[m] = vld1q_s32(sc + 4 * m);
    sb.mins[0] = sb.mins[1] = vdupq_n_s16(0);
  }
};

// Sum of the products of 16 codes with 16 activations in int16 lane pairs: lane i holds
// w_i x_i + w_{i+8} x_{i+8}, |.| <= 2 * 32 * 127 = 8128.
inline int16x8_t dot16(int8x16_t w, int8x16_t x) {
  return vmlal_high_s8(vmull_s8(vget_low_s8(w), vget_low_s8(x)), w, x);
}

// isum (and msum, for the types with mins) of one decoded super-block with one activation block
// xb. kRuns: one scale per run of 16 (q2_K, q3_K, q6_K); otherwise one per group of 32 (q4_K,
// q5_K). kHasMin: msum is computed (q2_K, q4_K, q5_K); otherwise it is 0.
template <bool kRuns, bool kHasMin>
inline void super_block_sums(const SuperBlock& sb, const uint8_t* xb, int32_t& isum,
                             int32_t& msum) {
  const auto* xq = reinterpret_cast<const int8_t*>(xb + 36);
  const int16x8_t b0 = vreinterpretq_s16_u8(vld1q_u8(xb + 4));   // bsums 0..7
  const int16x8_t b1 = vreinterpretq_s16_u8(vld1q_u8(xb + 20));  // bsums 8..15
  if constexpr (kRuns) {
    // Per group g: r[g] = {run 2g in lanes 0+1, run 2g+1 in lanes 2+3} (int32, exact), then
    // vpaddq of two groups gives runs 4m .. 4m+3 in lanes 0..3, matching scale[m].
    // Bounds: |run| <= 16 * 32 * 127 < 2^16, |isum| < 2^27 (matmul_internal.h).
    int32x4_t r[8];
    for (int g = 0; g < 8; ++g) {
      const int16x8_t pa = dot16(sb.q[2 * g], vld1q_s8(xq + 32 * g));
      const int16x8_t pb = dot16(sb.q[2 * g + 1], vld1q_s8(xq + 32 * g + 16));
      r[g] = vpaddq_s32(vpaddlq_s16(pa), vpaddlq_s16(pb));
    }
    int32x4_t acc = vdupq_n_s32(0);
    for (int m = 0; m < 4; ++m) {
      acc = vaddq_s32(acc, vmulq_s32(vpaddq_s32(r[2 * m], r[2 * m + 1]), sb.scale[m]));
    }
    isum = vaddvq_s32(acc);
    // q2_K: msum = sum_k mn_k * bsums[k] (|.| <= 16 * 15 * 16 * 127 < 2^19).
    msum = 0;
    if constexpr (kHasMin) {
      int32x4_t m = vmull_s16(vget_low_s16(b0), vget_low_s16(sb.mins[0]));
      m = vmlal_high_s16(m, b0, sb.mins[0]);
      m = vmlal_s16(m, vget_low_s16(b1), vget_low_s16(sb.mins[1]));
      m = vmlal_high_s16(m, b1, sb.mins[1]);
      msum = vaddvq_s32(m);
    }
  } else {
    static_assert(kHasMin, "the group layout (q4_K, q5_K) always has mins");
    // Per group g: the 32 products summed into int16 lanes (four per lane, |.| <= 4 * 31 * 127 =
    // 15748), widened in pairs to int32: g[..] holds the group's sum across its four lanes. Two
    // rounds of vpaddq give groups 0..3 (and 4..7) in lanes 0..3, matching scale[0] (scale[1]).
    // Bounds: |group| <= 32 * 31 * 127 < 2^17, |isum| < 2^26.
    int32x4_t g4[8];
    for (int g = 0; g < 8; ++g) {
      const int8x16_t x0 = vld1q_s8(xq + 32 * g);
      const int8x16_t x1 = vld1q_s8(xq + 32 * g + 16);
      g4[g] = vpaddlq_s16(vaddq_s16(dot16(sb.q[2 * g], x0), dot16(sb.q[2 * g + 1], x1)));
    }
    const int32x4_t groups_lo =
        vpaddq_s32(vpaddq_s32(g4[0], g4[1]), vpaddq_s32(g4[2], g4[3]));  // groups 0..3
    const int32x4_t groups_hi =
        vpaddq_s32(vpaddq_s32(g4[4], g4[5]), vpaddq_s32(g4[6], g4[7]));  // groups 4..7
    isum =
        vaddvq_s32(vaddq_s32(vmulq_s32(groups_lo, sb.scale[0]), vmulq_s32(groups_hi, sb.scale[1])));
    // msum: pair j of bsums (bsums[2j] + bsums[2j + 1], |.| <= 32 * 127, fits int16) times mn_j.
    const int16x8_t pairs = vpaddq_s16(b0, b1);  // lane j: pair j
    msum = vaddvq_s32(vmlal_high_s16(vmull_s16(vget_low_s16(pairs), vget_low_s16(sb.mins[0])),
                                     pairs, sb.mins[0]));
  }
}

template <class Dec, bool kRuns, bool kHasMin>
struct QKTile {
  template <int R, int T>
  struct Kernel {
    static void run(const MatmulArgs& a, int64_t o, int64_t t0) {
      const auto [w, x] = tile_at<R, T>(a, o, t0);
      float acc[R][T];
      for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) acc[r][t] = 0.0f;
      const int64_t n_blocks = a.n_in / 256;
      for (int64_t b = 0; b < n_blocks; ++b) {
        SuperBlock sb[R];
        for (int r = 0; r < R; ++r) Dec::decode(w[r] + b * Dec::kBytes, sb[r]);
        for (int t = 0; t < T; ++t) {
          const uint8_t* xb = x[t] + b * kActBytes;
          const float dx = load_f32(xb);
          for (int r = 0; r < R; ++r) {
            int32_t isum, msum;
            super_block_sums<kRuns, kHasMin>(sb[r], xb, isum, msum);
            // The scalar reference's float operations, in its order (no fusing).
            acc[r][t] = acc[r][t] + (sb[r].d * dx) * static_cast<float>(isum);
            if constexpr (kHasMin) {
              acc[r][t] = acc[r][t] - (sb[r].dmin * dx) * static_cast<float>(msum);
            }
          }
        }
      }
      for (int t = 0; t < T; ++t)
        for (int r = 0; r < R; ++r) a.out[(t0 + t) * a.n_out + o + r] = acc[r][t];
    }
  };
};

template <int R, int T>
using Q2KKernel = QKTile<DecQ2K, true, true>::Kernel<R, T>;
template <int R, int T>
using Q3KKernel = QKTile<DecQ3K, true, false>::Kernel<R, T>;
template <int R, int T>
using Q4KKernel = QKTile<DecQ45K<false>, false, true>::Kernel<R, T>;
template <int R, int T>
using Q5KKernel = QKTile<DecQ45K<true>, false, true>::Kernel<R, T>;
template <int R, int T>
using Q6KKernel = QKTile<DecQ6K, true, false>::Kernel<R, T>;

}  // namespace

void matmul_q2_k(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_tiles<Q2KKernel, 2, 4, 2>(a, b, e);
}
void matmul_q3_k(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_tiles<Q3KKernel, 2, 4, 2>(a, b, e);
}
void matmul_q4_k(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_tiles<Q4KKernel, 2, 4, 2>(a, b, e);
}
void matmul_q5_k(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_tiles<Q5KKernel, 2, 4, 2>(a, b, e);
}
void matmul_q6_k(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_tiles<Q6KKernel, 2, 4, 2>(a, b, e);
}

}  // namespace trellis::kernels_detail::neon
