// AVX-512 VNNI matmul for Q4_K and Q6_K weights against ActQ8_K activations: contract case 3 of
// matmul_internal.h, bit for bit (its integer sums are exact, and each row's float steps are the
// scalar ones, one row per lane).
//
// A 16-row tile holds one weight row per 32-bit lane (see tile_rows.h). For sub-block j and
// dword k, W lane r = codes 4k .. 4k+3 of sub-block j of row r (unsigned, 0..15), so
//   sub_j = sum_k vpdpbusd(W[j][k], broadcast of activation codes 32j + 4k .. 32j + 4k + 3)
// gives sub-block j's dot for 16 rows at once (eight vpdpbusd), and the scales, mins and float
// steps are per-lane vector operations shared by the 16 rows.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/x86/avx512/avx512_util.h"
#include "kernels/x86/avx512/kernels_avx512.h"
#include "kernels/x86/avx512/tile_rows.h"

namespace trellis::kernels_detail::avx512 {
namespace {

static_assert(offsetof(ActQ8_K, bsums) == 4 && offsetof(ActQ8_K, qs) == 36);
constexpr size_t kActBytes = sizeof(ActQ8_K);
constexpr size_t kQ4KBytes = 144;  // block_q4_K: d @0, dmin @2, scales[12] @4, qs[128] @16

// The per-lane header of a q4_K super-block: scales, mins (as int16 pairs for vpdpwssd with the
// activation's bsums pairs) and the two f16 factors.
struct Q4KHeader {
  __m512i scale[8];     // lane r: sc_j of row r
  __m512i min_pair[8];  // lane r: mn_j in both int16 halves
  __m512 d;
  __m512 dmin;
};

// The 6-bit scales and mins of sub-block j (see quant/block_types.h for the packing of the 12
// bytes s[0..12)): j < 4: sc = s[j] & 63, mn = s[j + 4] & 63; j >= 4: sc = (s[j + 4] & 15) |
// (s[j - 4] >> 6) << 4, mn = (s[j + 4] >> 4) | (s[j] >> 6) << 4. Here s[0..4), s[4..8) and
// s[8..12) are the dwords h[1], h[2], h[3] of each lane.
inline Q4KHeader load_q4k_header(const TileRows& rows) {
  __m512i h[4];
  load_transposed(rows, 0, h);
  Q4KHeader hd;
  hd.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h[0]));
  hd.dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h[0], 16)));
  const __m512i six = _mm512_set1_epi32(63), four = _mm512_set1_epi32(15),
                top = _mm512_set1_epi32(0x30);
  __m512i mn[8];
  for (int j = 0; j < 4; ++j) {
    const unsigned shift = 8 * static_cast<unsigned>(j);
    hd.scale[j] = _mm512_and_si512(_mm512_srli_epi32(h[1], shift), six);
    mn[j] = _mm512_and_si512(_mm512_srli_epi32(h[2], shift), six);
    hd.scale[j + 4] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(h[3], shift), four),
                                      _mm512_and_si512(_mm512_srli_epi32(h[1], shift + 2), top));
    mn[j + 4] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(h[3], shift + 4), four),
                                _mm512_and_si512(_mm512_srli_epi32(h[2], shift + 2), top));
  }
  for (int j = 0; j < 8; ++j) hd.min_pair[j] = _mm512_or_si512(mn[j], _mm512_slli_epi32(mn[j], 16));
  return hd;
}

// The dot of eight codes registers with the 32 activation codes at xq, in two chains.
inline __m512i sub_block_dot(const __m512i w[8], const uint8_t* xq) {
  __m512i even = _mm512_setzero_si512(), odd = _mm512_setzero_si512();
  for (int k = 0; k < 8; k += 2) {
    even = _mm512_dpbusd_epi32(even, w[k], _mm512_set1_epi32(load_i32(xq + 4 * k)));
    odd = _mm512_dpbusd_epi32(odd, w[k + 1], _mm512_set1_epi32(load_i32(xq + 4 * k + 4)));
  }
  return _mm512_add_epi32(even, odd);
}

// Rows o .. o+last_row (lanes past last_row repeat it), tokens t0 .. t0+T-1.
template <int T>
void tile_q4_k(const MatmulArgs& a, int64_t o, int last_row, int64_t t0) {
  TileRows rows(a.w + static_cast<size_t>(o) * a.w_row_bytes, a.w_row_bytes, last_row);
  const uint8_t* w0 = rows.first;
  const uint8_t* x = a.act + static_cast<size_t>(t0) * a.act_row_bytes;
  __m512 acc[T];
  __m512i isum[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  for (int64_t b = 0; b < a.n_in / 256; ++b) {
    rows.first = w0 + static_cast<size_t>(b) * kQ4KBytes;
    for (int r = 0; r < kTileRows; ++r) {
      for (size_t line = 0; line < kQ4KBytes; line += 64) prefetch(rows.next_tile_row(r) + line);
    }
    const Q4KHeader hd = load_q4k_header(rows);
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
    // qs[32c .. 32c + 32) holds sub-blocks 2c (low nibbles) and 2c + 1 (high nibbles).
    for (int c = 0; c < 4; ++c) {
      __m512i raw[8], lo[8], hi[8];
      load_transposed(rows, 16 + 32 * static_cast<size_t>(c), raw);
      load_transposed(rows, 32 + 32 * static_cast<size_t>(c), raw + 4);
      for (int k = 0; k < 8; ++k) {
        lo[k] = _mm512_and_si512(raw[k], nibble);
        hi[k] = _mm512_and_si512(_mm512_srli_epi16(raw[k], 4), nibble);
      }
      for (int t = 0; t < T; ++t) {
        const uint8_t* xq = x + static_cast<size_t>(t) * a.act_row_bytes + b * kActBytes + 36;
        const __m512i p_lo = sub_block_dot(lo, xq + 64 * c);
        const __m512i p_hi = sub_block_dot(hi, xq + 64 * c + 32);
        isum[t] = _mm512_add_epi32(isum[t],
                                   _mm512_add_epi32(_mm512_mullo_epi32(p_lo, hd.scale[2 * c]),
                                                    _mm512_mullo_epi32(p_hi, hd.scale[2 * c + 1])));
      }
    }
    for (int t = 0; t < T; ++t) {
      const uint8_t* xb = x + static_cast<size_t>(t) * a.act_row_bytes + b * kActBytes;
      // msum = sum_j mn_j * (bsums[2j] + bsums[2j + 1]), one int16 pair per vpdpwssd.
      __m512i msum = _mm512_setzero_si512();
      for (int j = 0; j < 8; ++j)
        msum =
            _mm512_dpwssd_epi32(msum, hd.min_pair[j], _mm512_set1_epi32(load_i32(xb + 4 + 4 * j)));
      const __m512 dx = _mm512_set1_ps(load_f32(xb));
      acc[t] = _mm512_add_ps(acc[t],
                             _mm512_mul_ps(_mm512_mul_ps(hd.d, dx), _mm512_cvtepi32_ps(isum[t])));
      acc[t] = _mm512_sub_ps(acc[t],
                             _mm512_mul_ps(_mm512_mul_ps(hd.dmin, dx), _mm512_cvtepi32_ps(msum)));
    }
  }
  const __mmask16 keep = static_cast<__mmask16>((1u << (last_row + 1)) - 1);
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(a.out + (t0 + t) * a.n_out + o, keep, acc[t]);
}

// All tokens for rows o .. o+last_row: tiles of 16, 4, then 1 token.
void q4_k_rows(const MatmulArgs& a, int64_t o, int last_row) {
  int64_t t = 0;
  for (; t + 16 <= a.n_tokens; t += 16) tile_q4_k<16>(a, o, last_row, t);
  for (; t + 4 <= a.n_tokens; t += 4) tile_q4_k<4>(a, o, last_row, t);
  for (; t < a.n_tokens; ++t) tile_q4_k<1>(a, o, last_row, t);
}

constexpr size_t kQ6KBytes = 210;  // block_q6_K: ql[128] @0, qh[64] @128, scales[16] @192, d @208

// The signed scale of run `run` (int8 at byte run % 4 of s[run / 4], s = the transposed
// scales), sign-extended per lane.
inline __m512i q6k_scale(const __m512i s[4], int run) {
  const unsigned up = 24 - 8 * static_cast<unsigned>(run % 4);
  return _mm512_srai_epi32(_mm512_slli_epi32(s[run / 4], up), 24);
}

// Lanes: the scales of runs 2m and 2m + 1 as an int16 pair (for vpdpwssd with bsums pairs).
inline __m512i q6k_scale_pair(const __m512i s[4], int m) {
  const __m512i low16 = _mm512_set1_epi32(0xffff);
  return _mm512_or_si512(_mm512_and_si512(q6k_scale(s, 2 * m), low16),
                         _mm512_slli_epi32(q6k_scale(s, 2 * m + 1), 16));
}

// Q6_K, contract case 3. Group g = 4h + k (half h, quarter k) holds elements 128h + 32k + l,
// l = 0..31 (runs 2g and 2g + 1): low 4 bits from ql[64h + 32 (k & 1) + l] (low nibble for
// k < 2, high for k >= 2), bits 4-5 from (qh[32h + l] >> 2k) & 3. Codes enter unsigned (0..63);
// the -32 is applied through the bsums: isum = sum_run sc * (sum q x) - 32 sum_run sc * bsum.
template <int T>
void tile_q6_k(const MatmulArgs& a, int64_t o, int last_row, int64_t t0) {
  TileRows rows(a.w + static_cast<size_t>(o) * a.w_row_bytes, a.w_row_bytes, last_row);
  const uint8_t* w0 = rows.first;
  const uint8_t* x = a.act + static_cast<size_t>(t0) * a.act_row_bytes;
  __m512 acc[T];
  __m512i isum[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i nibble = _mm512_set1_epi8(0x0f), two_bits = _mm512_set1_epi8(0x30);
  for (int64_t b = 0; b < a.n_in / 256; ++b) {
    rows.first = w0 + static_cast<size_t>(b) * kQ6KBytes;
    for (int r = 0; r < kTileRows; ++r) {
      for (size_t line = 0; line < kQ6KBytes; line += 64) prefetch(rows.next_tile_row(r) + line);
    }
    __m512i scales[4];
    load_transposed(rows, 192, scales);
    // d: the high half of the dword at 206 (not 208: that would read past the block).
    const __m512 d =
        _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(gather_dwords(rows, 206), 16)));
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      __m512i qh[8];
      load_transposed(rows, 128 + 32 * static_cast<size_t>(h), qh);
      load_transposed(rows, 144 + 32 * static_cast<size_t>(h), qh + 4);
      // Quarters k and k + 2 read the same ql bytes (low and high nibbles): transpose them once
      // for both. (The integer sums are exact, so visiting the quarters as 0, 2, 1, 3 changes
      // nothing.)
      for (int k_low = 0; k_low < 2; ++k_low) {
        __m512i ql[8];
        const size_t ql_at = 64 * static_cast<size_t>(h) + 32 * static_cast<size_t>(k_low);
        load_transposed(rows, ql_at, ql);
        load_transposed(rows, ql_at + 16, ql + 4);
        for (int k = k_low; k < 4; k += 2) {
          __m512i code[8];
          for (int kk = 0; kk < 8; ++kk) {
            const __m512i low = k < 2 ? _mm512_and_si512(ql[kk], nibble)
                                      : _mm512_and_si512(_mm512_srli_epi16(ql[kk], 4), nibble);
            // (qh >> 2k) & 3, moved to bits 4-5: shift by 2k - 4 (left while 2k < 4).
            const __m512i high = k < 2
                                     ? _mm512_slli_epi16(qh[kk], static_cast<unsigned>(4 - 2 * k))
                                     : _mm512_srli_epi16(qh[kk], static_cast<unsigned>(2 * k - 4));
            code[kk] = _mm512_or_si512(low, _mm512_and_si512(high, two_bits));
          }
          const int g = 4 * h + k;
          const __m512i sc_lo = q6k_scale(scales, 2 * g), sc_hi = q6k_scale(scales, 2 * g + 1);
          for (int t = 0; t < T; ++t) {
            const uint8_t* xq =
                x + static_cast<size_t>(t) * a.act_row_bytes + b * kActBytes + 36 + 32 * g;
            __m512i p_lo = _mm512_setzero_si512(), p_hi = _mm512_setzero_si512();
            for (int kk = 0; kk < 4; ++kk) {
              p_lo = _mm512_dpbusd_epi32(p_lo, code[kk], _mm512_set1_epi32(load_i32(xq + 4 * kk)));
              p_hi = _mm512_dpbusd_epi32(p_hi, code[kk + 4],
                                         _mm512_set1_epi32(load_i32(xq + 16 + 4 * kk)));
            }
            isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(_mm512_mullo_epi32(p_lo, sc_lo),
                                                                 _mm512_mullo_epi32(p_hi, sc_hi)));
          }
        }
      }
    }
    __m512i sc_pair[8];
    for (int m = 0; m < 8; ++m) sc_pair[m] = q6k_scale_pair(scales, m);
    for (int t = 0; t < T; ++t) {
      const uint8_t* xb = x + static_cast<size_t>(t) * a.act_row_bytes + b * kActBytes;
      __m512i bias = _mm512_setzero_si512();  // sum_run sc * bsum
      for (int m = 0; m < 8; ++m)
        bias = _mm512_dpwssd_epi32(bias, sc_pair[m], _mm512_set1_epi32(load_i32(xb + 4 + 4 * m)));
      const __m512i total = _mm512_sub_epi32(isum[t], _mm512_slli_epi32(bias, 5));
      const __m512 dx = _mm512_set1_ps(load_f32(xb));
      acc[t] =
          _mm512_add_ps(acc[t], _mm512_mul_ps(_mm512_mul_ps(d, dx), _mm512_cvtepi32_ps(total)));
    }
  }
  const __mmask16 keep = static_cast<__mmask16>((1u << (last_row + 1)) - 1);
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(a.out + (t0 + t) * a.n_out + o, keep, acc[t]);
}

void q6_k_rows(const MatmulArgs& a, int64_t o, int last_row) {
  int64_t t = 0;
  for (; t + 16 <= a.n_tokens; t += 16) tile_q6_k<16>(a, o, last_row, t);
  for (; t + 4 <= a.n_tokens; t += 4) tile_q6_k<4>(a, o, last_row, t);
  for (; t < a.n_tokens; ++t) tile_q6_k<1>(a, o, last_row, t);
}

}  // namespace

void matmul_q6_k(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  int64_t o = row_begin;
  for (; o + kTileRows <= row_end; o += kTileRows) q6_k_rows(a, o, kTileRows - 1);
  if (o < row_end) q6_k_rows(a, o, static_cast<int>(row_end - o - 1));
}

void matmul_q4_k(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  int64_t o = row_begin;
  for (; o + kTileRows <= row_end; o += kTileRows) q4_k_rows(a, o, kTileRows - 1);
  if (o < row_end) q4_k_rows(a, o, static_cast<int>(row_end - o - 1));
}

}  // namespace trellis::kernels_detail::avx512
