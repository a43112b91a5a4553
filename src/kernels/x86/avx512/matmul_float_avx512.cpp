// AVX-512 matmul for float weights (F32, F16, BF16): contract case 1b of matmul_internal.h. Sixteen
// output rows lie in the lanes of one accumulator per token, and column i of the 16-row group
// enters it with one fused multiply-add against the token's x_i broadcast: each output element is
// one chain of fused multiply-adds in the order of i, whatever the tile, and no sum across lanes
// is left for the end.
//
// Packed weights (WeightLayout::FLOAT_X16, kernels/float_x16_layout.h) hold a group's column as
// one vector; the tiles are 4 groups x 6 tokens (24 accumulators, 4 weight vectors, 1
// broadcast). From GGUF rows a group's 16 x 16 squares are transposed into that order on the
// stack first, then used the same way (slower: the rows layout serves matrices that were not
// packed). Measured on Zen 4 (matmul_bench, 64 tokens, F16): 4 x 6 packed tiles 1.1 to 1.2 times
// the speed of the previous form of this kernel (4 x 4 tiles of sixteen-lane dot products summed
// across lanes at the end) on bge-small's and TinyLlama's matrices; 2 x 12, 3 x 8 and 5 x 5 tiles
// were slower than 4 x 6.
#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <cstdint>

#include "kernels/float_x16_layout.h"
#include "kernels/tiling.h"
#include "kernels/x86/avx512/avx512_util.h"
#include "kernels/x86/avx512/kernels_avx512.h"

namespace trellis::kernels_detail::avx512 {
namespace {

static_assert(kFloatX16Rows == 16);

// load16: sixteen whole values; load16(p, lanes): the lanes given, the others 0.
struct LoadF32 {
  static constexpr int kBytes = 4;
  static __m512 load16(const uint8_t* p) { return _mm512_loadu_ps(p); }
  static __m512 load16(const uint8_t* p, __mmask16 lanes) {
    return _mm512_maskz_loadu_ps(lanes, p);
  }
};
struct LoadF16 {
  static constexpr int kBytes = 2;
  static __m512 load16(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 load16(const uint8_t* p, __mmask16 lanes) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes, p));
  }
};
struct LoadBF16 {
  static constexpr int kBytes = 2;
  static __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static __m512 load16(const uint8_t* p) {
    return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 load16(const uint8_t* p, __mmask16 lanes) {
    return widen(_mm256_maskz_loadu_epi16(lanes, p));
  }
};

// The accumulators of P groups x T tokens; group p holds rows o + 16 p .. o + 16 p + 15.
template <int P, int T>
struct Accumulators {
  __m512 acc[P][T];

  Accumulators() {
    for (int p = 0; p < P; ++p)
      for (int t = 0; t < T; ++t) acc[p][t] = _mm512_setzero_ps();
  }
  // Column i of each group (w[p]) times x_i of each token (x[t] is its activation row).
  [[gnu::always_inline]] inline void add(const __m512 (&w)[P], const float* const (&x)[T],
                                         int64_t i) {
    for (int t = 0; t < T; ++t) {
      const __m512 xi = _mm512_set1_ps(x[t][i]);
      for (int p = 0; p < P; ++p) acc[p][t] = _mm512_fmadd_ps(w[p], xi, acc[p][t]);
    }
  }
  // Rows o .. row_end - 1 of tokens t0 .. t0 + T - 1 (lanes past row_end are not stored).
  void store(const MatmulArgs& a, int64_t o, int64_t row_end, int64_t t0) const {
    for (int p = 0; p < P; ++p) {
      const int64_t first = o + 16 * p;
      const int64_t n = std::min<int64_t>(16, row_end - first);
      if (n <= 0) break;
      const auto lanes = static_cast<__mmask16>((1u << n) - 1);
      for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(a.out + (t0 + t) * a.n_out + first, lanes, acc[p][t]);
    }
  }
};

template <int T>
[[gnu::always_inline]] inline void token_rows(const MatmulArgs& a, int64_t t0,
                                              const float* (&x)[T]) {
  for (int t = 0; t < T; ++t)
    x[t] = reinterpret_cast<const float*>(a.act + static_cast<size_t>(t0 + t) * a.act_row_bytes);
}

// Packed: groups o / 16 .. o / 16 + P - 1, tokens t0 .. t0 + T - 1.
template <class Load>
struct PackedTile {
  template <int P, int T>
  static void run(const MatmulArgs& a, int64_t o, int64_t row_end, int64_t t0) {
    const size_t column_bytes = 16 * Load::kBytes;
    const size_t group_bytes = static_cast<size_t>(a.n_in) * column_bytes;
    const uint8_t* group[P];
    for (int p = 0; p < P; ++p) group[p] = a.w + static_cast<size_t>(o / 16 + p) * group_bytes;
    const float* x[T];
    token_rows<T>(a, t0, x);
    Accumulators<P, T> acc;
    for (int64_t i = 0; i < a.n_in; ++i) {
      __m512 w[P];
      for (int p = 0; p < P; ++p) w[p] = Load::load16(group[p] + static_cast<size_t>(i) * column_bytes);
      acc.add(w, x, i);
    }
    acc.store(a, o, row_end, t0);
  }
};

// GGUF rows: one group (rows o .. o + 15, the rows past the last repeating it), tokens t0 .. t0 +
// T - 1; each 16 x 16 square of the group is transposed into columns before use.
template <class Load>
struct RowsTile {
  template <int P, int T>
  static void run(const MatmulArgs& a, int64_t o, int64_t row_end, int64_t t0) {
    static_assert(P == 1);
    const uint8_t* row[16];
    for (int r = 0; r < 16; ++r)
      row[r] = a.w + static_cast<size_t>(std::min<int64_t>(o + r, row_end - 1)) * a.w_row_bytes;
    const float* x[T];
    token_rows<T>(a, t0, x);
    Accumulators<1, T> acc;
    alignas(64) float columns[256];
    for (int64_t i0 = 0; i0 < a.n_in; i0 += 16) {
      const int64_t n = std::min<int64_t>(16, a.n_in - i0);
      __m512 square[16];
      if (n == 16) {
        for (int r = 0; r < 16; ++r) square[r] = Load::load16(row[r] + i0 * Load::kBytes);
      } else {
        const auto lanes = static_cast<__mmask16>((1u << n) - 1);
        for (int r = 0; r < 16; ++r) square[r] = Load::load16(row[r] + i0 * Load::kBytes, lanes);
      }
      transpose16x16(square, columns);
      for (int64_t k = 0; k < n; ++k) {
        const __m512 w[1] = {_mm512_load_ps(columns + 16 * k)};
        acc.add(w, x, i0 + k);
      }
    }
    acc.store(a, o, row_end, t0);
  }
};

// Tile::run<P, left> for the last `left` (< L) tokens from t.
template <class Tile, int P, int L>
void leftover_tokens(const MatmulArgs& a, int64_t o, int64_t row_end, int64_t t, int64_t left) {
  if constexpr (L > 1) {
    if (left == L - 1) return Tile::template run<P, L - 1>(a, o, row_end, t);
    leftover_tokens<Tile, P, L - 1>(a, o, row_end, t, left);
  }
}

// Rows [row_begin, row_end) (row_begin a multiple of 16) in tiles of P groups x T tokens; the
// groups left over one at a time, the tokens left over in one narrower tile. Tokens go in blocks
// (see drive_tiles) so that a block's activations stay in cache while the groups pass.
template <class Tile, int P, int T>
void drive_groups(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  assert(row_begin % 16 == 0);
  const int64_t row_bytes = static_cast<int64_t>(a.act_row_bytes);
  // Whole tiles per block, rounded up: a block of 64 tokens in tiles of 12 is 5 tiles and one
  // of 4, not 60 tokens and a block of 4 that streams the weights again.
  const int64_t per_block = std::max<int64_t>((kMinBlockTokens + T - 1) / T * T,
                                              kTokenBlockBytes / row_bytes / T * T);
  for (int64_t block = 0; block < a.n_tokens; block += per_block) {
    const int64_t block_end = std::min(a.n_tokens, block + per_block);
    int64_t o = row_begin;
    if constexpr (P > 1) {
      for (; o + 16 * P <= row_end; o += 16 * P) {
        int64_t t = block;
        for (; t + T <= block_end; t += T) Tile::template run<P, T>(a, o, row_end, t);
        leftover_tokens<Tile, P, T>(a, o, row_end, t, block_end - t);
      }
    }
    for (; o < row_end; o += 16) {
      int64_t t = block;
      for (; t + T <= block_end; t += T) Tile::template run<1, T>(a, o, row_end, t);
      leftover_tokens<Tile, 1, T>(a, o, row_end, t, block_end - t);
    }
  }
}

}  // namespace

void matmul_f32(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_groups<RowsTile<LoadF32>, 1, 8>(a, b, e);
}
void matmul_f16(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_groups<RowsTile<LoadF16>, 1, 8>(a, b, e);
}
void matmul_bf16(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_groups<RowsTile<LoadBF16>, 1, 8>(a, b, e);
}
void matmul_f32_x16(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_groups<PackedTile<LoadF32>, 4, 6>(a, b, e);
}
void matmul_f16_x16(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_groups<PackedTile<LoadF16>, 4, 6>(a, b, e);
}
void matmul_bf16_x16(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_groups<PackedTile<LoadBF16>, 4, 6>(a, b, e);
}

}  // namespace trellis::kernels_detail::avx512
