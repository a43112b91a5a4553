// The 16-row x T-token tile of the AVX-512 kernels for the signed 32-element block types (contract
// case 2b of matmul_internal.h), shared by the kernels that read GGUF rows
// (matmul_q32_avx512.cpp) and the one that reads packed Q4_0 (matmul_q4_0_x16_avx512.cpp): where
// the weights come from changes, the arithmetic does not, so both layouts give the same bits.
//
// Tile layout for one block of 16 rows (lane r = row r):
//   W[k] lane r = codes 4k .. 4k+3 of row r, as signed bytes (q - 8, q - 16, or the int8 itself)
// vpdpbusd wants its unsigned operand first, so the activation codes enter as x + 128 (one xor),
// and the dot is corrected by 128 * sum(codes):
//   P = sum_i q_i * x_i = sum_i q_i * (x_i + 128) - 128 * sum_i q_i
// All terms are exact in int32 (|P| <= 32 * 255 * 128).
// (AVX-512 translation units only.)
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/x86/avx512/avx512_util.h"

namespace trellis::kernels_detail::avx512 {

constexpr size_t kActBytes = sizeof(ActQ8_0);
static_assert(offsetof(ActQ8_0, qs) == 8);

// One block of a 16-row tile, in the layout above.
struct TileBlock {
  __m512i w[8];
  __m512i neg_correction;  // lane r: -128 * sum of row r's codes
  __m512 d;                // lane r: row r's scale
};

// -128 * (sum of the codes) per lane, for codes whose sums over eight bytes fit an int8.
inline __m512i neg_correction_small(const __m512i w[8]) {
  __m512i code_sum = _mm512_setzero_si512();
  for (int k = 0; k < 8; ++k) code_sum = _mm512_add_epi8(code_sum, w[k]);
  const __m512i scaled =
      _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(-128), code_sum);
  return _mm512_sub_epi32(_mm512_setzero_si512(), scaled);
}

// Q4_0 codes from t[k] lane r = bytes 4k .. 4k+3 of row r's qs[16]: code i is the low nibble of
// qs[i] (i < 16) or the high nibble of qs[i - 16], minus 8; so W[k] is the low nibbles of t[k] and
// W[k + 4] the high ones.
inline void decode_q4_0(const __m512i t[4], TileBlock& tb) {
  const __m512i nibble = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi8(8);
  for (int k = 0; k < 4; ++k) {
    tb.w[k] = _mm512_sub_epi8(_mm512_and_si512(t[k], nibble), eight);
    tb.w[k + 4] = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(t[k], 4), nibble), eight);
  }
  tb.neg_correction = neg_correction_small(tb.w);
}

// The tile of one 16-row group's blocks (src.load(b, tb) fills block b) and tokens t0 .. t0+T-1,
// written to rows o .. o+last_row (lanes past last_row compute a copy of it and are not stored).
template <class Src, int T>
void tile(const MatmulArgs& a, Src& src, int64_t o, int last_row, int64_t t0) {
  const uint8_t* x = a.act + static_cast<size_t>(t0) * a.act_row_bytes;
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  // The activation codes of the current block with 128 added (u8), one row of 32 per token.
  alignas(32) uint8_t biased[T][32];
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < a.n_in / 32; ++b) {
    TileBlock tb;
    src.load(b, tb);
    for (int t = 0; t < T; ++t) {
      const uint8_t* xb = x + static_cast<size_t>(t) * a.act_row_bytes + b * kActBytes;
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 8));
      _mm256_store_si256(reinterpret_cast<__m256i*>(biased[t]), _mm256_xor_si256(xq, flip));
    }
    // Read the codes back from memory: a broadcast load costs no shuffle, whereas the compiler,
    // left to itself, forwards the stored register through eight shuffles per token.
    asm("" : "+m"(biased));
    for (int t = 0; t < T; ++t) {
      const uint8_t* xb = x + static_cast<size_t>(t) * a.act_row_bytes + b * kActBytes;
      // Two independent chains halve the latency of the eight dependent vpdpbusd.
      __m512i p_even = tb.neg_correction, p_odd = _mm512_setzero_si512();
      for (int k = 0; k < 8; k += 2) {
        p_even =
            _mm512_dpbusd_epi32(p_even, _mm512_set1_epi32(load_i32(biased[t] + 4 * k)), tb.w[k]);
        p_odd = _mm512_dpbusd_epi32(p_odd, _mm512_set1_epi32(load_i32(biased[t] + 4 * k + 4)),
                                    tb.w[k + 1]);
      }
      const __m512i p = _mm512_add_epi32(p_even, p_odd);
      const __m512 s = _mm512_mul_ps(tb.d, _mm512_set1_ps(load_f32(xb)));
      acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(s, _mm512_cvtepi32_ps(p)));
    }
  }
  const __mmask16 keep = static_cast<__mmask16>((1u << (last_row + 1)) - 1);
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(a.out + (t0 + t) * a.n_out + o, keep, acc[t]);
}

}  // namespace trellis::kernels_detail::avx512
