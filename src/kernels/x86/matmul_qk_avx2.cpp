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

// The 6-bit scale (sc) and min (mn) of sub-block j of a q4_K / q5_K super-block; see
// quant/block_types.h for the packing of the 12 bytes (re-implemented here, see avx2_util.h).
inline void unpack_scales_mins(const uint8_t* s, uint8_t* sc, uint8_t* mn) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 0x3f;
    mn[j] = s[j + 4] & 0x3f;
    sc[j + 4] = static_cast<uint8_t>((s[j + 8] & 0x0f) | ((s[j] >> 6) << 4));
    mn[j + 4] = static_cast<uint8_t>((s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4));
  }
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
    uint8_t sc[8], mn[8];
    unpack_scales_mins(p + 4, sc, mn);
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
    for (int j = 0; j < 8; ++j) sb.scale[j] = _mm256_set1_epi16(sc[j]);
    const __m128i m16 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn)));
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
    const auto* scales = reinterpret_cast<const int8_t*>(p + 192);
    for (int g = 0; g < 8; ++g) {
      sb.scale[g] =
          _mm256_set_m128i(_mm_set1_epi16(scales[2 * g + 1]), _mm_set1_epi16(scales[2 * g]));
    }
    sb.correction =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192)));
  }
};

// isum (and for q4_K / q5_K, msum) of one decoded super-block with one activation block.
template <bool kSixBit>
inline void super_block_sums(const SuperBlock& sb, const uint8_t* xb, int32_t& isum,
                             int32_t& msum) {
  __m256i acc = _mm256_setzero_si256();
  for (int g = 0; g < 8; ++g) {
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 36 + 32 * g));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(sb.q[g], xq), sb.scale[g]));
  }
  const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 4));
  const __m256i corr = _mm256_madd_epi16(bsums, sb.correction);
  if constexpr (kSixBit) {
    isum = hsum_epi32(_mm256_sub_epi32(acc, _mm256_slli_epi32(corr, 5)));
    msum = 0;
  } else {
    isum = hsum_epi32(acc);
    msum = hsum_epi32(corr);
  }
}

template <class Dec, bool kSixBit>
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
        for (int r = 0; r < R; ++r) {
          prefetch_ahead(w[r] + b * Dec::kBytes, static_cast<int>(Dec::kBytes));
          Dec::decode(w[r] + b * Dec::kBytes, sb[r]);
        }
        for (int t = 0; t < T; ++t) {
          const uint8_t* xb = x[t] + b * kActBytes;
          const float dx = load_f32(xb);
          for (int r = 0; r < R; ++r) {
            int32_t isum, msum;
            super_block_sums<kSixBit>(sb[r], xb, isum, msum);
            acc[r][t] = acc[r][t] + (sb[r].d * dx) * static_cast<float>(isum);
            if constexpr (!kSixBit) {
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
using Q4KKernel = QKTile<DecQ45K<false>, false>::Kernel<R, T>;
template <int R, int T>
using Q5KKernel = QKTile<DecQ45K<true>, false>::Kernel<R, T>;
template <int R, int T>
using Q6KKernel = QKTile<DecQ6K, true>::Kernel<R, T>;

}  // namespace

void matmul_q4_k(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_tiles<Q4KKernel, 2, 4, 2>(a, b, e);
}
void matmul_q5_k(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_tiles<Q5KKernel, 2, 4, 2>(a, b, e);
}
void matmul_q6_k(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_tiles<Q6KKernel, 2, 4, 2>(a, b, e);
}

}  // namespace trellis::kernels_detail::avx2
