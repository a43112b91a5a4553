// AVX2 matmul for the K super-block types (Q4_K, Q5_K, Q6_K) against activations quantized to
// ActQ8_K: contract case 3 of matmul_internal.h. Each super-block's integer sums are exact (the
// order of integer additions is free), then folded into one float accumulator exactly as the
// scalar reference does.
//
// A row's super-block is first decoded into eight registers of 32 unsigned codes, group g holding
// elements [32g, 32g + 32) (byte l = element 32g + l), and per-group int16 scale vectors, so the
// decode is shared by all the tokens of a tile.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/x86/avx2_util.h"
#include "kernels/x86/kernels_avx2.h"

namespace trellis::kernels_detail::avx2 {
namespace {

static_assert(offsetof(ActQ8_K, bsums) == 4 && offsetof(ActQ8_K, qs) == 36);
constexpr size_t kActBytes = sizeof(ActQ8_K);

// The 6-bit scales (bytes 0..7 of *sc) and mins (*mn) of the eight sub-blocks of a q4_K / q5_K
// super-block, from the 12 bytes at s; see quant/block_types.h for the packing (sub-blocks 0-3:
// low 6 bits of bytes 0-3 and 4-7; 4-7: a nibble of bytes 8-11 with the top 2 bits of 0-3 / 4-7
// above it), unpacked four at a time in 32-bit words.
inline void unpack_scales_mins(const uint8_t* s, uint64_t* sc, uint64_t* mn) {
  uint32_t u[3];
  std::memcpy(u, s, sizeof(u));
  const uint32_t sc_lo = u[0] & 0x3f3f3f3fu;
  const uint32_t mn_lo = u[1] & 0x3f3f3f3fu;
  const uint32_t sc_hi = (u[2] & 0x0f0f0f0fu) | ((u[0] >> 2) & 0x30303030u);
  const uint32_t mn_hi = ((u[2] >> 4) & 0x0f0f0f0fu) | ((u[1] >> 2) & 0x30303030u);
  *sc = sc_lo | (static_cast<uint64_t>(sc_hi) << 32);
  *mn = mn_lo | (static_cast<uint64_t>(mn_hi) << 32);
}

// Byte j of `bytes` (j < 8), zero-extended, in each of the sixteen int16 lanes.
inline __m256i broadcast_byte_as_int16(__m256i bytes, int j) {
  return _mm256_shuffle_epi8(bytes, _mm256_set1_epi16(static_cast<int16_t>(0x8000 | j)));
}

// A decoded super-block of one weight row.
struct SuperBlock {
  __m256i q[8];        // codes of group g (0..63 at most), byte l = element 32g + l
  __m256i scale[8];    // int16 multipliers of vpmaddwd for group g (see each type)
  __m256i correction;  // int16 x16 multiplied with the activation's bsums (see each type)
  float d;
  float dmin;
};

// q4_K: d @0, dmin @2, scales[12] @4, qs[128] @16. q5_K: the same, with qh[32] @16, qs @48.
// Group j is sub-block j: codes = low (j even) / high (j odd) nibbles of qs[32 (j/2) + l], plus
// for q5_K bit j of qh[l] as bit 4. scale[j] = sc_j in every int16; correction = mn_{k/2} in
// int16 k, so that vpmaddwd(bsums, correction) lane j = mn_j * (bsums[2j] + bsums[2j+1]).
template <bool kFiveBit>
struct DecQ45K {
  static constexpr size_t kBytes = kFiveBit ? 176 : 144;
  static void decode(const uint8_t* p, SuperBlock& sb) {
    sb.d = f16_bits_to_f32(load_u16(p));
    sb.dmin = f16_bits_to_f32(load_u16(p + 2));
    uint64_t sc, mn;
    unpack_scales_mins(p + 4, &sc, &mn);
    const uint8_t* qs = p + (kFiveBit ? 48 : 16);
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    __m256i qh = _mm256_setzero_si256();
    if constexpr (kFiveBit) qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16));
    for (int c = 0; c < 4; ++c) {
      const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * c));
      __m256i lo = _mm256_and_si256(bytes, low4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low4);
      if constexpr (kFiveBit) {
        const __m256i bit_lo = _mm256_set1_epi8(static_cast<char>(1 << (2 * c)));
        const __m256i bit_hi = _mm256_set1_epi8(static_cast<char>(1 << (2 * c + 1)));
        const __m256i sixteen = _mm256_set1_epi8(16);
        lo = _mm256_or_si256(
            lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit_lo), bit_lo), sixteen));
        hi = _mm256_or_si256(
            hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit_hi), bit_hi), sixteen));
      }
      sb.q[2 * c] = lo;
      sb.q[2 * c + 1] = hi;
    }
    const __m256i sc_bytes = _mm256_set1_epi64x(static_cast<int64_t>(sc));
    for (int j = 0; j < 8; ++j) sb.scale[j] = broadcast_byte_as_int16(sc_bytes, j);
    const __m128i m16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(mn)));
    sb.correction = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
  }
};

// q6_K: ql[128] @0, qh[64] @128, scales[16] (int8) @192, d @208. Group g = 4h + k (half h,
// quarter k): low 4 bits from ql[64h + 32 (k & 1) + l] (low nibble for k < 2, high for k >= 2),
// bits 4-5 from (qh[32h + l] >> 2k) & 3; codes are the unsigned q (0..63), the -32 is applied
// through the activation sums: sum (q - 32) x = sum q x - 32 bsum. scale[g] = scales[2g] in int16
// 0..7 and scales[2g + 1] in 8..15 (vpmaddubsw's int16 k covers elements 2k, 2k+1 of the group);
// correction = the 16 scales, so vpmaddwd(bsums, correction) sums scales[k] * bsums[k] in pairs.
struct DecQ6K {
  static constexpr size_t kBytes = 210;
  static void decode(const uint8_t* p, SuperBlock& sb) {
    sb.d = f16_bits_to_f32(load_u16(p + 208));
    sb.dmin = 0.0f;
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i two_bits = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 * h));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 * h + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 128 + 32 * h));
      sb.q[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(ql0, low4),
                                        _mm256_and_si256(_mm256_slli_epi16(qh, 4), two_bits));
      sb.q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(ql1, low4),
                                        _mm256_and_si256(_mm256_slli_epi16(qh, 2), two_bits));
      sb.q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                                        _mm256_and_si256(qh, two_bits));
      sb.q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                                        _mm256_and_si256(_mm256_srli_epi16(qh, 2), two_bits));
    }
    // Scale byte k moved to the high byte of an int16 and shifted back down: sign-extended.
    const __m128i scales = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192));
    const __m256i both_halves = _mm256_set_m128i(scales, scales);
    for (int g = 0; g < 8; ++g) {
      const __m256i pick = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>((2 * g + 1) << 8)),
                                            _mm_set1_epi16(static_cast<int16_t>((2 * g) << 8)));
      sb.scale[g] = _mm256_srai_epi16(_mm256_shuffle_epi8(both_halves, pick), 8);
    }
    sb.correction = _mm256_cvtepi8_epi16(scales);
  }
};

// An R x T tile (R * T <= 8) whose accumulators share one register: lane r * T + t belongs to
// (row o + r, token t0 + t). Per super-block, each pair's integer sums are reduced together by
// lane_sums, then every lane takes the contract's two float steps at once.
template <class Dec, bool kSixBit>
struct QKTile {
  template <int R, int T>
  struct Kernel {
    static constexpr int P = R * T;
    static_assert(P <= 8);
    static void run(const MatmulArgs& a, int64_t o, int64_t t0) {
      const auto [w, x] = tile_at<R, T>(a, o, t0);
      __m256 acc = _mm256_setzero_ps();
      const int64_t n_blocks = a.n_in / 256;
      for (int64_t b = 0; b < n_blocks; ++b) {
        SuperBlock sb[R];
        for (int r = 0; r < R; ++r) {
          prefetch_ahead(w[r] + b * Dec::kBytes, static_cast<int>(Dec::kBytes));
          Dec::decode(w[r] + b * Dec::kBytes, sb[r]);
        }
        const uint8_t* xb[T];
        for (int t = 0; t < T; ++t) xb[t] = x[t] + b * kActBytes;
        __m256i dots[P];
        for (int p = 0; p < P; ++p) dots[p] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            const __m256i xq =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[t] + 36 + 32 * g));
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
              dots[r * T + t] = _mm256_add_epi32(
                  dots[r * T + t],
                  _mm256_madd_epi16(_mm256_maddubs_epi16(sb[r].q[g], xq), sb[r].scale[g]));
              pin_to_register(dots[r * T + t]);
            }
          }
        }
        __m256i corr[P];
        float dx[T];
        for (int t = 0; t < T; ++t) {
          const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[t] + 4));
          dx[t] = load_f32(xb[t]);
          for (int r = 0; r < R; ++r) corr[r * T + t] = _mm256_madd_epi16(bsums, sb[r].correction);
        }
        // Built in registers: a vector loaded from eight scalar stores would wait for them.
        const __m256 x_scale = pair_lanes<R, T>([&](int, int t) { return dx[t]; });
        const __m256 scale =
            _mm256_mul_ps(pair_lanes<R, T>([&](int r, int) { return sb[r].d; }), x_scale);
        const __m256 scale_min =
            _mm256_mul_ps(pair_lanes<R, T>([&](int r, int) { return sb[r].dmin; }), x_scale);
        __m256i isum = lane_sums<P>(dots);
        const __m256i msum = lane_sums<P>(corr);
        if constexpr (kSixBit) isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(msum, 5));
        acc = _mm256_add_ps(acc, _mm256_mul_ps(scale, _mm256_cvtepi32_ps(isum)));
        if constexpr (!kSixBit) {
          acc = _mm256_sub_ps(acc, _mm256_mul_ps(scale_min, _mm256_cvtepi32_ps(msum)));
        }
      }
      alignas(32) float result[8];
      _mm256_store_ps(result, acc);
      for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) a.out[(t0 + t) * a.n_out + o + r] = result[r * T + t];
    }
  };
};

template <int R, int T>
using Q4KKernel = QKTile<DecQ45K<false>, false>::Kernel<R, T>;
template <int R, int T>
using Q5KKernel = QKTile<DecQ45K<true>, false>::Kernel<R, T>;
template <int R, int T>
using Q6KKernel = QKTile<DecQ6K, true>::Kernel<R, T>;

}  // namespace

void matmul_q4_k(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_pair_tiles<Q4KKernel, 4>(a, b, e);
}
void matmul_q5_k(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_pair_tiles<Q5KKernel, 4>(a, b, e);
}
void matmul_q6_k(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_pair_tiles<Q6KKernel, 2>(a, b, e);
}

}  // namespace trellis::kernels_detail::avx2
