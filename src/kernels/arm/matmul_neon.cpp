// NEON (AArch64 Advanced SIMD) matmul for F16, Q8_0 and Q4_0, the ActQ8_0 / ActQ8_K quantizers,
// and the NEON kernel table (which also gathers the K-type kernels of matmul_qk_neon.cpp): the
// arithmetic contract of matmul_internal.h, bit-identical to the scalar reference.
// The contract's eight float lanes are two float32x4 registers: lo = lanes 0-3, hi = lanes 4-7.
//
// Integer dots use only baseline ARMv8.0 instructions (vmull_s8, then pairwise widening adds), so
// they run on every AArch64 core; SDOT (ARMv8.2 dotprod) would be faster but is optional
// hardware and left for later (cpu_features().neon_dotprod reports it).
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/arm/kernels_neon.h"
#include "kernels/arm/neon_util.h"
#include "kernels/matmul_internal.h"
#include "kernels/tiling.h"
#include "quant/half.h"

namespace trellis::kernels_detail {
namespace {

using neon::load_f32;
using neon::load_u16;

struct Lanes8 {
  float32x4_t lo, hi;
};

// ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
inline float hsum8(const Lanes8& a) {
  const float32x4_t s = vaddq_f32(a.lo, a.hi);                        // a_k + a_{k+4}
  const float32x2_t t = vadd_f32(vget_low_f32(s), vget_high_f32(s));  // s0 + s2, s1 + s3
  return vget_lane_f32(t, 0) + vget_lane_f32(t, 1);
}

// ---- F16 ------------------------------------------------------------------------------------

// Eight f16 values at p (any alignment) as two exact f32 vectors.
inline Lanes8 load_f16x8(const uint8_t* p) {
  const float16x8_t h = vreinterpretq_f16_u8(vld1q_u8(p));
  return {vcvt_f32_f16(vget_low_f16(h)), vcvt_high_f32_f16(h)};
}

inline Lanes8 load_f32x8(const uint8_t* p) {
  return {vreinterpretq_f32_u8(vld1q_u8(p)), vreinterpretq_f32_u8(vld1q_u8(p + 16))};
}

template <int R, int T>
struct F16Kernel {
  static void run(const MatmulArgs& a, int64_t o, int64_t t0) {
    const auto [w, x] = tile_at<R, T>(a, o, t0);
    Lanes8 acc[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) acc[r][t] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    auto step = [&](const Lanes8* wv, const uint8_t* const* xs) {
      for (int t = 0; t < T; ++t) {
        const Lanes8 xv = load_f32x8(xs[t]);
        for (int r = 0; r < R; ++r) {
          acc[r][t].lo = vaddq_f32(acc[r][t].lo, vmulq_f32(wv[r].lo, xv.lo));
          acc[r][t].hi = vaddq_f32(acc[r][t].hi, vmulq_f32(wv[r].hi, xv.hi));
        }
      }
    };
    const int64_t n8 = a.n_in / 8 * 8;
    for (int64_t i = 0; i < n8; i += 8) {
      Lanes8 wv[R];
      const uint8_t* xs[T];
      for (int r = 0; r < R; ++r) wv[r] = load_f16x8(w[r] + 2 * i);
      for (int t = 0; t < T; ++t) xs[t] = x[t] + 4 * i;
      step(wv, xs);
    }
    if (n8 < a.n_in) {  // zero-padded tail: +0 * +0 added to a lane leaves it unchanged
      const auto rest = static_cast<size_t>(a.n_in - n8);
      Lanes8 wv[R];
      uint8_t xbuf[T][32] = {};
      const uint8_t* xs[T];
      for (int r = 0; r < R; ++r) {
        uint8_t wbuf[16] = {};
        std::memcpy(wbuf, w[r] + 2 * n8, 2 * rest);
        wv[r] = load_f16x8(wbuf);
      }
      for (int t = 0; t < T; ++t) {
        std::memcpy(xbuf[t], x[t] + 4 * n8, 4 * rest);
        xs[t] = xbuf[t];
      }
      step(wv, xs);
    }
    for (int t = 0; t < T; ++t)
      for (int r = 0; r < R; ++r) a.out[(t0 + t) * a.n_out + o + r] = hsum8(acc[r][t]);
  }
};

// ---- Q8_0 and Q4_0 --------------------------------------------------------------------------

// The contract's p_j of one block: w0/x0 hold codes 0..15, w1/x1 codes 16..31.
// vmull_s8 gives exact int16 products (|w| <= 128, |x| <= 127); vpaddlq_s16 adds neighbours into
// int32 (elements 2m, 2m+1), vpaddq_s32 adds neighbouring pairs: lane j = elements 4j .. 4j+3.
struct IntLanes {
  int32x4_t lo, hi;
};
inline IntLanes block_dot(int8x16_t w0, int8x16_t w1, int8x16_t x0, int8x16_t x1) {
  const int32x4_t p0 = vpaddlq_s16(vmull_s8(vget_low_s8(w0), vget_low_s8(x0)));
  const int32x4_t p1 = vpaddlq_s16(vmull_high_s8(w0, x0));
  const int32x4_t p2 = vpaddlq_s16(vmull_s8(vget_low_s8(w1), vget_low_s8(x1)));
  const int32x4_t p3 = vpaddlq_s16(vmull_high_s8(w1, x1));
  return {vpaddq_s32(p0, p1), vpaddq_s32(p2, p3)};
}

struct WeightBlock {
  int8x16_t q0, q1;  // codes 0..15 and 16..31
  float d;
};

// block_q8_0: d @0, qs[32] @2.
struct DecQ8_0 {
  static constexpr size_t kBytes = 34;
  static WeightBlock decode(const uint8_t* p) {
    return {vld1q_s8(reinterpret_cast<const int8_t*>(p + 2)),
            vld1q_s8(reinterpret_cast<const int8_t*>(p + 18)), f16_to_f32(load_u16(p))};
  }
};

// block_q4_0: d @0, qs[16] @2; code i < 16 is the low nibble of qs[i], code i >= 16 the high
// nibble of qs[i - 16]; the contract's code is q - 8.
struct DecQ4_0 {
  static constexpr size_t kBytes = 18;
  static WeightBlock decode(const uint8_t* p) {
    const uint8x16_t v = vld1q_u8(p + 2);
    const int8x16_t eight = vdupq_n_s8(8);
    return {vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0f))), eight),
            vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), eight), f16_to_f32(load_u16(p))};
  }
};

// ActQ8_0: d @0, s @4, qs[32] @8.
template <class Dec>
struct Q32Tile {
  template <int R, int T>
  struct Kernel {
    static void run(const MatmulArgs& a, int64_t o, int64_t t0) {
      const auto [w, x] = tile_at<R, T>(a, o, t0);
      Lanes8 acc[R][T];
      for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) acc[r][t] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
      const int64_t n_blocks = a.n_in / 32;
      for (int64_t b = 0; b < n_blocks; ++b) {
        WeightBlock wb[R];
        for (int r = 0; r < R; ++r) wb[r] = Dec::decode(w[r] + b * Dec::kBytes);
        for (int t = 0; t < T; ++t) {
          const uint8_t* xb = x[t] + b * sizeof(ActQ8_0);
          const int8x16_t x0 = vld1q_s8(reinterpret_cast<const int8_t*>(xb + 8));
          const int8x16_t x1 = vld1q_s8(reinterpret_cast<const int8_t*>(xb + 24));
          const float dx = load_f32(xb);
          for (int r = 0; r < R; ++r) {
            const IntLanes p = block_dot(wb[r].q0, wb[r].q1, x0, x1);
            const float32x4_t s = vdupq_n_f32(wb[r].d * dx);
            acc[r][t].lo = vaddq_f32(acc[r][t].lo, vmulq_f32(s, vcvtq_f32_s32(p.lo)));
            acc[r][t].hi = vaddq_f32(acc[r][t].hi, vmulq_f32(s, vcvtq_f32_s32(p.hi)));
          }
        }
      }
      for (int t = 0; t < T; ++t)
        for (int r = 0; r < R; ++r) a.out[(t0 + t) * a.n_out + o + r] = hsum8(acc[r][t]);
    }
  };
};

template <int R, int T>
using Q8_0Kernel = Q32Tile<DecQ8_0>::Kernel<R, T>;
template <int R, int T>
using Q4_0Kernel = Q32Tile<DecQ4_0>::Kernel<R, T>;

void matmul_f16(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_tiles<F16Kernel, 4, 2, 4>(a, b, e);
}
void matmul_q8_0(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_tiles<Q8_0Kernel, 2, 4, 4>(a, b, e);
}
void matmul_q4_0(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_tiles<Q4_0Kernel, 2, 4, 4>(a, b, e);
}

// ---- Activation quantization ----------------------------------------------------------------

// n (a multiple of 16) values with one scale; codes to qs, code sums of each 16 to sums16.
// vcvtnq rounds to nearest even, as the contract says; the clamp precedes the (then exact)
// saturating narrows.
inline float quantize_block(const float* x, int n, int8_t* qs, int32_t* sums16) {
  float32x4_t vmax = vdupq_n_f32(0.0f);
  for (int i = 0; i < n; i += 4) vmax = vmaxq_f32(vmax, vabsq_f32(vld1q_f32(x + i)));
  const float amax = vmaxvq_f32(vmax);
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const float32x4_t vid = vdupq_n_f32(id);
  const int32x4_t lo = vdupq_n_s32(-127), hi = vdupq_n_s32(127);
  for (int i = 0; i < n; i += 16) {
    int32x4_t q[4];
    for (int k = 0; k < 4; ++k) {
      q[k] = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(x + i + 4 * k), vid));
      q[k] = vminq_s32(vmaxq_s32(q[k], lo), hi);
    }
    sums16[i / 16] = vaddvq_s32(vaddq_s32(vaddq_s32(q[0], q[1]), vaddq_s32(q[2], q[3])));
    const int16x8_t h0 = vcombine_s16(vqmovn_s32(q[0]), vqmovn_s32(q[1]));
    const int16x8_t h1 = vcombine_s16(vqmovn_s32(q[2]), vqmovn_s32(q[3]));
    vst1q_s8(qs + i, vcombine_s8(vqmovn_s16(h0), vqmovn_s16(h1)));
  }
  return d;
}

void quantize_act_q8_0(const float* x, void* out, int64_t n_in) {
  auto* blocks = static_cast<uint8_t*>(out);
  for (int64_t b = 0; b < n_in / 32; ++b) {
    ActQ8_0 block;
    int32_t sums16[2];
    block.d = quantize_block(x + 32 * b, 32, block.qs, sums16);
    block.s = block.d * static_cast<float>(sums16[0] + sums16[1]);
    std::memcpy(blocks + b * sizeof(ActQ8_0), &block, sizeof(block));
  }
}

void quantize_act_q8_k(const float* x, void* out, int64_t n_in) {
  auto* blocks = static_cast<uint8_t*>(out);
  for (int64_t b = 0; b < n_in / 256; ++b) {
    ActQ8_K block;
    int32_t sums16[16];
    block.d = quantize_block(x + 256 * b, 256, block.qs, sums16);
    for (int k = 0; k < 16; ++k) block.bsums[k] = static_cast<int16_t>(sums16[k]);
    std::memcpy(blocks + b * sizeof(ActQ8_K), &block, sizeof(block));
  }
}

}  // namespace

// F16, Q8_0, Q4_0 and Q2_K .. Q6_K have NEON kernels; the other types fall back to the scalar ones.
const KernelTable& neon_kernels() {
  static constexpr KernelTable kTable = [] {
    KernelTable t;
    t.matmul = row_kernels({
        {DType::F16, matmul_f16},
        {DType::Q8_0, matmul_q8_0},
        {DType::Q4_0, matmul_q4_0},
        {DType::Q2_K, neon::matmul_q2_k},
        {DType::Q3_K, neon::matmul_q3_k},
        {DType::Q4_K, neon::matmul_q4_k},
        {DType::Q5_K, neon::matmul_q5_k},
        {DType::Q6_K, neon::matmul_q6_k},
    });
    t.quantize_act[static_cast<size_t>(ActFormat::Q8_0)] = quantize_act_q8_0;
    t.quantize_act[static_cast<size_t>(ActFormat::Q8_K)] = quantize_act_q8_k;
    t.attend_head = neon::attend_head;
    t.attend_head_dim_multiple = 4;
    t.attend_max_head_dim = neon::kAttendNeonMaxHeadDim;
    return t;
  }();
  return kTable;
}

}  // namespace trellis::kernels_detail
