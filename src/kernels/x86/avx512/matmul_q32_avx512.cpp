// AVX-512 VNNI matmul for the signed 32-element block types (Q4_0, Q5_0, Q8_0) against ActQ8_0
// activations, reading GGUF rows: contract case 2b of matmul_internal.h (whole-block integer dots,
// one float accumulator per output element).
//
// Why case 2b: under case 2 every 32-element block costs, per output element, an int->float
// conversion, two multiplies and an add on eight lanes, which caps an int8 kernel near the FP32
// rate. Here a 16-row tile keeps one weight row per 32-bit lane (q32_tile.h), so a block's whole
// integer dot for 16 rows and one token is eight vpdpbusd, and its float work (convert, scale,
// multiply, add) is shared by the 16 rows: about a quarter of the instructions per multiply-add.
//
// Every tile shape (16 rows x T tokens, and the rows left over, computed as a tile whose extra
// lanes repeat the last row) computes P exactly and then the same float operations in the same
// order, so results do not depend on the tiling or the batch.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/x86/avx512/avx512_util.h"
#include "kernels/x86/avx512/kernels_avx512.h"
#include "kernels/x86/avx512/q32_tile.h"
#include "kernels/x86/avx512/tile_rows.h"

namespace trellis::kernels_detail::avx512 {
namespace {

// The f16 scale at offset 0 of every block type here.
inline __m512 load_scales(const TileRows& rows) {
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(gather_dwords(rows, 0)));
}

// block_q4_0: d @0, qs[16] @2 (codes: decode_q4_0).
struct DecQ4_0 {
  static constexpr size_t kBytes = 18;
  static void load(const TileRows& rows, TileBlock& tb) {
    __m512i t[4];
    load_transposed(rows, 2, t);
    decode_q4_0(t, tb);
    tb.d = load_scales(rows);
  }
};

// block_q5_0: d @0, qh[4] @2 (bit i = bit 4 of code i), qs[16] @6. Code i minus 16.
struct DecQ5_0 {
  static constexpr size_t kBytes = 22;
  static void load(const TileRows& rows, TileBlock& tb) {
    __m512i t[4];
    load_transposed(rows, 6, t);
    const __m512i qh = gather_dwords(rows, 2);
    // spread[v] = the 4 bits of v, bit j moved to bit 4 of byte j (vpermd reads the low 4 bits
    // of each index lane, so (qh >> 4k) picks the entry of codes 4k .. 4k+3).
    const __m512i spread =
        _mm512_setr_epi32(0x00000000, 0x00000010, 0x00001000, 0x00001010, 0x00100000, 0x00100010,
                          0x00101000, 0x00101010, 0x10000000, 0x10000010, 0x10001000, 0x10001010,
                          0x10100000, 0x10100010, 0x10101000, 0x10101010);
    const __m512i nibble = _mm512_set1_epi8(0x0f), sixteen = _mm512_set1_epi8(16);
    for (int k = 0; k < 4; ++k) {
      const __m512i high_lo = _mm512_permutexvar_epi32(_mm512_srli_epi32(qh, 4 * k), spread);
      const __m512i high_hi = _mm512_permutexvar_epi32(_mm512_srli_epi32(qh, 4 * k + 16), spread);
      const __m512i lo = _mm512_or_si512(_mm512_and_si512(t[k], nibble), high_lo);
      const __m512i hi =
          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(t[k], 4), nibble), high_hi);
      tb.w[k] = _mm512_sub_epi8(lo, sixteen);
      tb.w[k + 4] = _mm512_sub_epi8(hi, sixteen);
    }
    tb.neg_correction = neg_correction_small(tb.w);  // eight codes in [-16, 15]: [-128, 120]
    tb.d = load_scales(rows);
  }
};

// block_q8_0: d @0, qs[32] @2. Codes are the int8 values.
struct DecQ8_0 {
  static constexpr size_t kBytes = 34;
  static void load(const TileRows& rows, TileBlock& tb) {
    load_transposed(rows, 2, tb.w);
    load_transposed(rows, 18, tb.w + 4);
    // Byte sums would overflow here: sum 128 * code in int32 directly.
    __m512i scaled = _mm512_setzero_si512();
    for (int k = 0; k < 8; ++k)
      scaled = _mm512_dpbusd_epi32(scaled, _mm512_set1_epi8(-128), tb.w[k]);
    tb.neg_correction = _mm512_sub_epi32(_mm512_setzero_si512(), scaled);
    tb.d = load_scales(rows);
  }
};

// The blocks of rows o .. o+last_row (lanes past last_row repeat it), from the GGUF rows.
template <class Dec>
struct RowBlocks {
  RowBlocks(const MatmulArgs& a, int64_t o, int last_row)
      : rows(a.w + static_cast<size_t>(o) * a.w_row_bytes, a.w_row_bytes, last_row),
        w0(rows.first) {}
  void load(int64_t b, TileBlock& tb) {
    rows.first = w0 + static_cast<size_t>(b) * Dec::kBytes;
    // Blocks that start at most 64 bytes apart reach every cache line of the row.
    constexpr int64_t kPrefetchEvery = 64 / Dec::kBytes;
    if (b % kPrefetchEvery == 0) {
      for (int r = 0; r < kTileRows; ++r) prefetch(rows.next_tile_row(r));
    }
    Dec::load(rows, tb);
  }
  TileRows rows;
  const uint8_t* w0;  // row o's first block
};

template <class Dec, int T>
void row_tile(const MatmulArgs& a, int64_t o, int last_row, int64_t t0) {
  RowBlocks<Dec> src(a, o, last_row);
  tile<RowBlocks<Dec>, T>(a, src, o, last_row, t0);
}

// Q4_0 for one token (decode), the same P and float steps as row_tile<DecQ4_0, T>, found with fewer
// instructions per weight byte: the codes enter vpdpbusd unsigned as the raw nibbles (0..15),
// against the activation codes as signed bytes, and the -8 is applied through the activations'
// sum:
//   P = sum_i (q_i - 8) * x_i = sum_i q_i * x_i - 8 * sum_i x_i
// (exact in int32: |P| <= 32 * 15 * 127 + 8 * 32 * 127). This drops the per-row code sums and
// the recentring of the codes, and needs no biased copy of the activations. The multi-token tiles
// keep the biased form, where the per-row work is shared by the tokens. kFull: last_row is 15, and
// the rows are addressed by stride (see load_transposed_full).
template <bool kFull>
void tile_q4_0_one_token(const MatmulArgs& a, int64_t o, int last_row, int64_t t0) {
  TileRows rows(a.w + static_cast<size_t>(o) * a.w_row_bytes, a.w_row_bytes, last_row);
  const uint8_t* x = a.act + static_cast<size_t>(t0) * a.act_row_bytes;
  __m512 acc = _mm512_setzero_ps();
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const uint8_t* w0 = rows.first;
  for (int64_t b = 0; b < a.n_in / 32; ++b) {
    rows.first = w0 + static_cast<size_t>(b) * DecQ4_0::kBytes;
    constexpr int64_t kPrefetchEvery = 64 / DecQ4_0::kBytes;
    if (b % kPrefetchEvery == 0) {
      if constexpr (kFull) {
        const uint8_t* next = rows.first + rows.next_tile;
        for (int r = 0; r < kTileRows; ++r) prefetch(next + static_cast<size_t>(r) * a.w_row_bytes);
      } else {
        for (int r = 0; r < kTileRows; ++r) prefetch(rows.next_tile_row(r));
      }
    }
    const uint8_t* xb = x + b * kActBytes;
    // sum_i x_i: vpsadbw sums the biased codes (x_i + 128) eight at a time.
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 8));
    const __m256i sad = _mm256_sad_epu8(_mm256_xor_si256(xq, flip), _mm256_setzero_si256());
    __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
    s2 = _mm_add_epi64(s2, _mm_unpackhi_epi64(s2, s2));
    const int32_t x_sum = _mm_cvtsi128_si32(s2) - 32 * 128;
    __m512i t[4];
    if constexpr (kFull) {
      load_transposed_full(rows.first + 2, a.w_row_bytes, t);
    } else {
      load_transposed(rows, 2, t);
    }
    // Two independent chains halve the latency of the eight dependent vpdpbusd.
    __m512i p_even = _mm512_set1_epi32(-8 * x_sum), p_odd = _mm512_setzero_si512();
    for (int k = 0; k < 4; ++k) {
      // t[k] low nibbles: codes 4k .. 4k+3; high nibbles: codes 16 + 4k .. 16 + 4k + 3.
      p_even = _mm512_dpbusd_epi32(p_even, _mm512_and_si512(t[k], nibble),
                                   _mm512_set1_epi32(load_i32(xb + 8 + 4 * k)));
      p_odd = _mm512_dpbusd_epi32(p_odd, _mm512_and_si512(_mm512_srli_epi16(t[k], 4), nibble),
                                  _mm512_set1_epi32(load_i32(xb + 8 + 16 + 4 * k)));
    }
    const __m512i p = _mm512_add_epi32(p_even, p_odd);
    const __m512 s = _mm512_mul_ps(load_scales(rows), _mm512_set1_ps(load_f32(xb)));
    acc = _mm512_add_ps(acc, _mm512_mul_ps(s, _mm512_cvtepi32_ps(p)));
  }
  const __mmask16 keep = static_cast<__mmask16>((1u << (last_row + 1)) - 1);
  _mm512_mask_storeu_ps(a.out + t0 * a.n_out + o, keep, acc);
}

template <class Dec, int T>
void tile_for(const MatmulArgs& a, int64_t o, int last_row, int64_t t0) {
  if constexpr (T == 1 && std::is_same_v<Dec, DecQ4_0>) {
    if (last_row == kTileRows - 1) {
      tile_q4_0_one_token<true>(a, o, last_row, t0);
    } else {
      tile_q4_0_one_token<false>(a, o, last_row, t0);
    }
  } else {
    row_tile<Dec, T>(a, o, last_row, t0);
  }
}

// All tokens for rows o .. o+last_row: tiles of 32, 8, 4, then 1 token (a token's result is the
// same in any of them).
template <class Dec>
void tile_rows(const MatmulArgs& a, int64_t o, int last_row) {
  int64_t t = 0;
  for (; t + 32 <= a.n_tokens; t += 32) row_tile<Dec, 32>(a, o, last_row, t);
  for (; t + 8 <= a.n_tokens; t += 8) row_tile<Dec, 8>(a, o, last_row, t);
  for (; t + 4 <= a.n_tokens; t += 4) row_tile<Dec, 4>(a, o, last_row, t);
  for (; t < a.n_tokens; ++t) tile_for<Dec, 1>(a, o, last_row, t);
}

template <class Dec>
void matmul_rows(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  int64_t o = row_begin;
  for (; o + kTileRows <= row_end; o += kTileRows) tile_rows<Dec>(a, o, kTileRows - 1);
  if (o < row_end) tile_rows<Dec>(a, o, static_cast<int>(row_end - o - 1));
}

}  // namespace

void matmul_q4_0(const MatmulArgs& a, int64_t b, int64_t e) {
  matmul_rows<DecQ4_0>(a, b, e);
}
void matmul_q5_0(const MatmulArgs& a, int64_t b, int64_t e) {
  matmul_rows<DecQ5_0>(a, b, e);
}
void matmul_q8_0(const MatmulArgs& a, int64_t b, int64_t e) {
  matmul_rows<DecQ8_0>(a, b, e);
}

}  // namespace trellis::kernels_detail::avx512
