// AVX2 matmul for the 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4) against
// activations quantized to ActQ8_0: contract case 2 of matmul_internal.h, and the ActQ8_0
// quantizer.
//
// Per block, a weight row's 32 codes are put in one register, code i in byte i. The integer dot
// with the activation codes uses vpmaddubsw (u8 x s8 -> pairs of int16) then vpmaddwd with ones
// (-> int32 lane j = bytes 4j .. 4j+3), which is exactly the contract's p_j. vpmaddubsw needs an
// unsigned first operand: signed codes (the _0 types) go in as |q| with the activation's sign
// flipped where q < 0 (vpsignb), so every pair stays within int16 (|q| <= 128, |x| <= 127).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/x86/avx2_util.h"
#include "kernels/x86/kernels_avx2.h"

namespace trellis::kernels_detail::avx2 {
namespace {

// A decoded weight block: q (signed or unsigned codes, byte i = code i), |q| for signed codes.
struct WeightBlock {
  __m256i q;
  __m256i abs_q;
  float d;
  float m;
};

// Byte i of the result is 0xff when bit i of `bits` is set, else 0.
inline __m256i bits_to_byte_mask(uint32_t bits) {
  const __m256i replicated = _mm256_set1_epi32(static_cast<int>(bits));
  // Bytes 0-7 take byte 0 of `bits`, 8-15 byte 1, 16-23 byte 2, 24-31 byte 3 (vpshufb works per
  // 128-bit lane; both lanes hold the replicated dword).
  const __m256i spread = _mm256_shuffle_epi8(
      replicated, _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                   2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

// The 16 bytes at p as 32 nibble codes: byte i < 16 = low nibble of p[i], byte i >= 16 = high
// nibble of p[i - 16].
inline __m256i unpack_nibbles(const uint8_t* p) {
  // The 16 bytes in both halves (one load), the upper half's 64-bit lanes shifted down by 4: after
  // the mask, byte i of the upper half is p[i]'s high nibble (the bits shifted in are masked off).
  const __m256i both =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i shifted = _mm256_srlv_epi64(both, _mm256_setr_epi64x(0, 0, 4, 4));
  return _mm256_and_si256(shifted, _mm256_set1_epi8(0x0f));
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Bit 4 of the 32 codes of a q5 block from its qh[4] at p: byte i = 16 where bit i is set.
inline __m256i fifth_bits(const uint8_t* p) {
  return _mm256_and_si256(bits_to_byte_mask(load_u32(p)), _mm256_set1_epi8(16));
}

// Each type: whether its codes are signed, whether it has a min, its block size, its scale and its
// codes. The Q types store d (f16) at byte 0, and the _1 types m (f16) at byte 2.

inline float f16_scale(const uint8_t* p) {
  return f16_bits_to_f32(load_u16(p));
}

// block_q4_0: d @0, qs[16] @2.  Code q - 8 in [-8, 7].
struct DecQ4_0 {
  static constexpr bool kSigned = true, kHasMin = false;
  static constexpr size_t kBytes = 18;
  static float scale(const uint8_t* p) { return f16_scale(p); }
  static __m256i codes(const uint8_t* p) {
    return _mm256_sub_epi8(unpack_nibbles(p + 2), _mm256_set1_epi8(8));
  }
};

// block_q4_1: d @0, m @2, qs[16] @4.  Code q in [0, 15].
struct DecQ4_1 {
  static constexpr bool kSigned = false, kHasMin = true;
  static constexpr size_t kBytes = 20;
  static float scale(const uint8_t* p) { return f16_scale(p); }
  static __m256i codes(const uint8_t* p) { return unpack_nibbles(p + 4); }
};

// block_q5_0: d @0, qh[4] @2 (bit i = bit 4 of code i), qs[16] @6.  Code q - 16 in [-16, 15].
struct DecQ5_0 {
  static constexpr bool kSigned = true, kHasMin = false;
  static constexpr size_t kBytes = 22;
  static float scale(const uint8_t* p) { return f16_scale(p); }
  static __m256i codes(const uint8_t* p) {
    return _mm256_sub_epi8(_mm256_or_si256(unpack_nibbles(p + 6), fifth_bits(p + 2)),
                           _mm256_set1_epi8(16));
  }
};

// block_q5_1: d @0, m @2, qh[4] @4, qs[16] @8.  Code q in [0, 31].
struct DecQ5_1 {
  static constexpr bool kSigned = false, kHasMin = true;
  static constexpr size_t kBytes = 24;
  static float scale(const uint8_t* p) { return f16_scale(p); }
  static __m256i codes(const uint8_t* p) {
    return _mm256_or_si256(unpack_nibbles(p + 8), fifth_bits(p + 4));
  }
};

// block_q8_0: d @0, qs[32] @2.  Code q in [-128, 127] (|-128| stays 0x80, read as the unsigned
// 128).
struct DecQ8_0 {
  static constexpr bool kSigned = true, kHasMin = false;
  static constexpr size_t kBytes = 34;
  static float scale(const uint8_t* p) { return f16_scale(p); }
  static __m256i codes(const uint8_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
  }
};

// The float bits of 2^(e - 128) for every E8M0 scale e, as mxfp4_scale builds them: a block's
// scale is looked up, not built.
struct Mxfp4ScaleBits {
  uint32_t bits[256];
};
constexpr Mxfp4ScaleBits make_mxfp4_scale_bits() {
  Mxfp4ScaleBits table{};
  for (uint32_t e = 0; e < 256; ++e) table.bits[e] = e < 2 ? 0x00200000u << e : (e - 1) << 23;
  return table;
}
constexpr Mxfp4ScaleBits kMxfp4ScaleBits = make_mxfp4_scale_bits();

// block_mxfp4: e @0 (E8M0), qs[16] @1 packed as q4_0.  Code: the doubled E2M1 value of the
// nibble, in [-12, 12], looked up 32 at a time (vpshufb); scale 2^(e - 128) from the table above
// (this file keeps to its own inline functions, see avx2_util.h).
struct DecMxfp4 {
  static constexpr bool kSigned = true, kHasMin = false;
  static constexpr size_t kBytes = 17;
  static float scale(const uint8_t* p) {
    float d;
    std::memcpy(&d, &kMxfp4ScaleBits.bits[p[0]], sizeof(d));
    return d;
  }
  static __m256i codes(const uint8_t* p) {
    const __m256i values =
        _mm256_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12, 0, 1, 2, 3, 4, 6,
                         8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    return _mm256_shuffle_epi8(values, unpack_nibbles(p + 1));
  }
};

template <class Dec>
inline WeightBlock decode(const uint8_t* p) {
  WeightBlock b;
  b.q = Dec::codes(p);
  b.abs_q = Dec::kSigned ? _mm256_abs_epi8(b.q) : b.q;
  b.d = Dec::scale(p);
  b.m = Dec::kHasMin ? f16_bits_to_f32(load_u16(p + 2)) : 0.0f;
  return b;
}

// ActQ8_0 layout: d @0, s @4, qs[32] @8.
constexpr size_t kActBytes = sizeof(ActQ8_0);
static_assert(offsetof(ActQ8_0, s) == 4 && offsetof(ActQ8_0, qs) == 8);

template <class Dec>
struct Q32Tile {
  template <int R, int T>
  struct Kernel {
    static void run(const MatmulArgs& a, int64_t o, int64_t t0) {
      const auto [w, x] = tile_at<R, T>(a, o, t0);
      __m256 acc[R][T];
      float m[R][T];
      for (int r = 0; r < R; ++r) {
        for (int t = 0; t < T; ++t) {
          acc[r][t] = _mm256_setzero_ps();
          m[r][t] = 0.0f;
        }
      }
      const int64_t n_blocks = a.n_in / 32;
      for (int64_t b = 0; b < n_blocks; ++b) {
        WeightBlock wb[R];
        __m256 dw[R];
        for (int r = 0; r < R; ++r) {
          prefetch_ahead(w[r] + b * Dec::kBytes, 1);
          wb[r] = decode<Dec>(w[r] + b * Dec::kBytes);
          dw[r] = _mm256_set1_ps(wb[r].d);
        }
        for (int t = 0; t < T; ++t) {
          const uint8_t* xb = x[t] + b * kActBytes;
          const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 8));
          const __m256 dx = _mm256_set1_ps(load_f32(xb));
          for (int r = 0; r < R; ++r) {
            const __m256i p = Dec::kSigned ? dot_u8_s8(wb[r].abs_q, _mm256_sign_epi8(xq, wb[r].q))
                                           : dot_u8_s8(wb[r].q, xq);
            // s = dw * dx in every lane (the same rounding as the scalar product).
            const __m256 s = _mm256_mul_ps(dw[r], dx);
            acc[r][t] = _mm256_add_ps(acc[r][t], _mm256_mul_ps(s, _mm256_cvtepi32_ps(p)));
            if constexpr (Dec::kHasMin) m[r][t] = m[r][t] + wb[r].m * load_f32(xb + 4);
          }
        }
      }
      for (int t = 0; t < T; ++t) {
        for (int r = 0; r < R; ++r) {
          float result = hsum8(acc[r][t]);
          if constexpr (Dec::kHasMin) result = result + m[r][t];
          a.out[(t0 + t) * a.n_out + o + r] = result;
        }
      }
    }
  };
};

template <int R, int T>
using Q4_0Kernel = Q32Tile<DecQ4_0>::Kernel<R, T>;
template <int R, int T>
using Q4_1Kernel = Q32Tile<DecQ4_1>::Kernel<R, T>;
template <int R, int T>
using Q5_0Kernel = Q32Tile<DecQ5_0>::Kernel<R, T>;
template <int R, int T>
using Q5_1Kernel = Q32Tile<DecQ5_1>::Kernel<R, T>;
template <int R, int T>
using Q8_0Kernel = Q32Tile<DecQ8_0>::Kernel<R, T>;
template <int R, int T>
using Mxfp4Kernel = Q32Tile<DecMxfp4>::Kernel<R, T>;

// Quantizes n (a multiple of 8, at most 256) values with one scale, as the contract says; writes
// the codes to qs and the int32 code sums of each group of 8 to sums8[n / 8]; returns d.
inline float quantize_block(const float* x, int n, int8_t* qs, int32_t* sums8) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 vmax = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8)
    vmax = _mm256_max_ps(vmax, _mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float amax = _mm_cvtss_f32(m4);
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const __m256 vid = _mm256_set1_ps(id);
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  for (int i = 0; i < n; i += 32) {
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      // cvtps2dq rounds to nearest even (the default MXCSR mode).
      q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * k), vid));
      q[k] = _mm256_min_epi32(_mm256_max_epi32(q[k], lo), hi);
    }
    // The four group sums in one reduction tree: after the hadds, 128-bit lane L holds the sums
    // of lane L of q[0..3]; adding the two lanes gives the sums of the groups (exact integers).
    const __m256i h =
        _mm256_hadd_epi32(_mm256_hadd_epi32(q[0], q[1]), _mm256_hadd_epi32(q[2], q[3]));
    const __m128i sums = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(sums8 + i / 8), sums);
    // int32 -> int16 -> int8 packs interleave the 128-bit lanes; the permute restores the order.
    const __m256i p16a = _mm256_packs_epi32(q[0], q[1]);
    const __m256i p16b = _mm256_packs_epi32(q[2], q[3]);
    const __m256i p8 = _mm256_packs_epi16(p16a, p16b);
    const __m256i ordered =
        _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + i), ordered);
  }
  return d;
}

}  // namespace

void matmul_q4_0(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_tiles<Q4_0Kernel, 2, 4, 4>(a, b, e);
}
void matmul_q4_1(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_tiles<Q4_1Kernel, 2, 4, 4>(a, b, e);
}
void matmul_q5_0(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_tiles<Q5_0Kernel, 2, 4, 4>(a, b, e);
}
void matmul_q5_1(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_tiles<Q5_1Kernel, 2, 4, 4>(a, b, e);
}
void matmul_q8_0(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_tiles<Q8_0Kernel, 2, 4, 4>(a, b, e);
}
void matmul_mxfp4(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_tiles<Mxfp4Kernel, 2, 4, 4>(a, b, e);
}

void quantize_act_q8_0(const float* x, void* out, int64_t n_in) {
  auto* blocks = static_cast<uint8_t*>(out);
  for (int64_t b = 0; b < n_in / 32; ++b) {
    ActQ8_0 block;
    int32_t sums8[4];
    block.d = quantize_block(x + 32 * b, 32, block.qs, sums8);
    block.s = block.d * static_cast<float>(sums8[0] + sums8[1] + sums8[2] + sums8[3]);
    std::memcpy(blocks + b * sizeof(ActQ8_0), &block, sizeof(block));
  }
}

void quantize_act_q8_k(const float* x, void* out, int64_t n_in) {
  auto* blocks = static_cast<uint8_t*>(out);
  for (int64_t b = 0; b < n_in / 256; ++b) {
    ActQ8_K block;
    int32_t sums8[32];
    block.d = quantize_block(x + 256 * b, 256, block.qs, sums8);
    for (int k = 0; k < 16; ++k)
      block.bsums[k] = static_cast<int16_t>(sums8[2 * k] + sums8[2 * k + 1]);
    std::memcpy(blocks + b * sizeof(ActQ8_K), &block, sizeof(block));
  }
}

}  // namespace trellis::kernels_detail::avx2
