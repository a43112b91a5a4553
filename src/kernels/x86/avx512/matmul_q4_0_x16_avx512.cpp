// AVX-512 VNNI matmul of packed Q4_0 (WeightLayout::Q4_0_X16, kernels/q4_0_x16_layout.h) against
// ActQ8_0 activations: contract case 2b, the same P and float steps as the kernel that reads the
// GGUF rows (matmul_q32_avx512.cpp), so a matrix gives the same bits in either layout.
//
// A packed block holds the 16 rows' scales and quants already in tile order: the tile loads them
// with five sequential vector loads, where reading GGUF rows costs sixteen row loads, a 16 x 4
// dword transpose and a gather of the scales. Each thread's rows are one contiguous stream.
#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>

#include "kernels/q4_0_x16_layout.h"
#include "kernels/x86/avx512/avx512_util.h"
#include "kernels/x86/avx512/kernels_avx512.h"
#include "kernels/x86/avx512/q32_tile.h"

namespace trellis::kernels_detail::avx512 {
namespace {

static_assert(kQ4_0X16Rows == 16);

// The four quant vectors t[k] of a packed block.
inline __m512i load_quads(const uint8_t* block, int k) {
  return _mm512_loadu_si512(block + 32 + 64 * k);
}

inline __m512 load_packed_scales(const uint8_t* block) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block)));
}

// The weights stream from memory once per call; with several tokens per block the work between
// two blocks' loads is long enough that the hardware prefetcher falls behind and every new line
// stalls. Asking for the block kPrefetchBlocks ahead (its 4.5 cache lines) keeps the stream in
// flight (8 tokens decoding together: about twice as fast; prefill, 32-token tiles: no change). The
// last blocks of a group prefetch into the next group, which comes next anyway.
constexpr size_t kPrefetchBlocks = 8;
// The address is computed as an integer: past the last group it lies beyond the weights, where a
// pointer may not point, but a prefetch of any address is only a hint and never faults.
inline void prefetch_ahead(const uint8_t* block) {
  const uintptr_t ahead = reinterpret_cast<uintptr_t>(block) + kPrefetchBlocks * kQ4_0X16BlockBytes;
  for (uintptr_t line = 0; line < kQ4_0X16BlockBytes; line += 64)
    _mm_prefetch(reinterpret_cast<const char*>(ahead + line), _MM_HINT_T0);
}

// The blocks of one packed 16-row group, for tile<> (q32_tile.h).
struct PackedBlocks {
  void load(int64_t b, TileBlock& tb) const {
    const uint8_t* block = group + static_cast<size_t>(b) * kQ4_0X16BlockBytes;
    const __m512i t[4] = {load_quads(block, 0), load_quads(block, 1), load_quads(block, 2),
                          load_quads(block, 3)};
    decode_q4_0(t, tb);
    tb.d = load_packed_scales(block);
  }
  const uint8_t* group;
};

// The raw-nibble tiles (decode) find the same P with fewer instructions per weight byte: the codes
// enter vpdpbusd unsigned as the raw nibbles (0..15), against the activation codes as signed
// bytes, and the -8 is applied through the activations' sum:
//   P = sum_i (q_i - 8) * x_i = sum_i q_i * x_i - 8 * sum_i x_i
// (exact in int32: |P| <= 32 * 15 * 127 + 8 * 32 * 127). That sum depends only on the token, so
// it is computed once per block for all the tiles of a call (neg8_code_sums) rather than per tile,
// and the activation codes enter as they are (no biased copy, as tile<> needs).
constexpr int64_t kMaxSumBlocks = 1024;  // n_in up to 32768 (larger: the general tile)
// Calls of fewer tokens than this (decode steps of a batch) run every token through the raw-nibble
// tiles; larger ones (prefill) use tile<> of q32_tile.h for their 32-token tiles and the raw-nibble
// tiles for what is left after them. Both give the same bits (P is exact; the float steps match).
constexpr int kMaxNibbleTokens = 31;

// out[b] = -8 * (sum of the 32 activation codes of block b of one token): vpsadbw sums the codes
// biased by 128, eight at a time.
void neg8_code_sums(const uint8_t* x, int64_t n_blocks, int32_t* out) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < n_blocks; ++b) {
    const __m256i codes =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + b * kActBytes + 8));
    const __m256i sad = _mm256_sad_epu8(_mm256_xor_si256(codes, flip), _mm256_setzero_si256());
    __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
    s2 = _mm_add_epi64(s2, _mm_unpackhi_epi64(s2, s2));
    out[b] = -8 * (_mm_cvtsi128_si32(s2) - 32 * 128);
  }
}

// T tokens t0 .. t0+T-1 of one packed group, with the raw-nibble P above; sums[t] holds token
// t0+t's neg8_code_sums. The block's quants, nibbles and scales are loaded once for the T tokens.
template <int T>
void nibble_tile(const MatmulArgs& a, const uint8_t* group, const int32_t (*sums)[kMaxSumBlocks],
                 int64_t o, int last_row, int64_t t0) {
  const uint8_t* x = a.act + static_cast<size_t>(t0) * a.act_row_bytes;
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < a.n_in / 32; ++b) {
    const uint8_t* block = group + static_cast<size_t>(b) * kQ4_0X16BlockBytes;
    prefetch_ahead(block);
    // t[k] low nibbles: codes 4k .. 4k+3; high nibbles: codes 16 + 4k .. 16 + 4k + 3.
    __m512i lo[4], hi[4];
    for (int k = 0; k < 4; ++k) {
      const __m512i q = load_quads(block, k);
      lo[k] = _mm512_and_si512(q, nibble);
      hi[k] = _mm512_and_si512(_mm512_srli_epi16(q, 4), nibble);
    }
    const __m512 d = load_packed_scales(block);
    for (int t = 0; t < T; ++t) {
      const uint8_t* xb = x + static_cast<size_t>(t) * a.act_row_bytes + b * kActBytes;
      // Two independent chains halve the latency of the eight dependent vpdpbusd.
      __m512i p_even = _mm512_set1_epi32(sums[t][b]), p_odd = _mm512_setzero_si512();
      for (int k = 0; k < 4; ++k) {
        p_even = _mm512_dpbusd_epi32(p_even, lo[k], _mm512_set1_epi32(load_i32(xb + 8 + 4 * k)));
        p_odd = _mm512_dpbusd_epi32(p_odd, hi[k], _mm512_set1_epi32(load_i32(xb + 8 + 16 + 4 * k)));
      }
      const __m512i p = _mm512_add_epi32(p_even, p_odd);
      const __m512 s = _mm512_mul_ps(d, _mm512_set1_ps(load_f32(xb)));
      acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(s, _mm512_cvtepi32_ps(p)));
    }
  }
  const __mmask16 keep = static_cast<__mmask16>((1u << (last_row + 1)) - 1);
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(a.out + (t0 + t) * a.n_out + o, keep, acc[t]);
}

}  // namespace

void matmul_q4_0_x16(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  assert(row_begin % kQ4_0X16Rows == 0);
  const int64_t n_blocks = a.n_in / 32;
  const size_t group_bytes = static_cast<size_t>(n_blocks) * kQ4_0X16BlockBytes;
  // Tokens from first_nibble on go through the raw-nibble tiles: all of them in a small call,
  // those after the 32-token tiles in a large one.
  const int64_t first_nibble = a.n_tokens <= kMaxNibbleTokens ? 0 : a.n_tokens - a.n_tokens % 32;
  const bool nibbles = n_blocks <= kMaxSumBlocks;
  int32_t sums[kMaxNibbleTokens][kMaxSumBlocks];
  if (nibbles) {
    for (int64_t t = first_nibble; t < a.n_tokens; ++t) {
      neg8_code_sums(a.act + static_cast<size_t>(t) * a.act_row_bytes, n_blocks,
                     sums[t - first_nibble]);
    }
  }
  for (int64_t o = row_begin; o < row_end; o += kQ4_0X16Rows) {
    const int last_row = static_cast<int>(std::min<int64_t>(kQ4_0X16Rows, row_end - o)) - 1;
    PackedBlocks src{a.w + static_cast<size_t>(o / kQ4_0X16Rows) * group_bytes};
    int64_t t = 0;
    if (!nibbles) {
      for (; t + 32 <= a.n_tokens; t += 32) tile<PackedBlocks, 32>(a, src, o, last_row, t);
      for (; t + 8 <= a.n_tokens; t += 8) tile<PackedBlocks, 8>(a, src, o, last_row, t);
      for (; t + 4 <= a.n_tokens; t += 4) tile<PackedBlocks, 4>(a, src, o, last_row, t);
      for (; t < a.n_tokens; ++t) tile<PackedBlocks, 1>(a, src, o, last_row, t);
      continue;
    }
    for (; t < first_nibble; t += 32) tile<PackedBlocks, 32>(a, src, o, last_row, t);
    const int32_t(*s)[kMaxSumBlocks] = sums;
    for (; t + 8 <= a.n_tokens; t += 8)
      nibble_tile<8>(a, src.group, s + (t - first_nibble), o, last_row, t);
    for (; t + 4 <= a.n_tokens; t += 4)
      nibble_tile<4>(a, src.group, s + (t - first_nibble), o, last_row, t);
    for (; t < a.n_tokens; ++t)
      nibble_tile<1>(a, src.group, s + (t - first_nibble), o, last_row, t);
  }
}

}  // namespace trellis::kernels_detail::avx512
