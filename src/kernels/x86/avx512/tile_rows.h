// The 16-row tiles of the AVX-512 kernels: weight rows held one per 32-bit lane, loaded and
// transposed on the fly from the row-major GGUF blocks (AVX-512 translation units only).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace trellis::kernels_detail::avx512 {

constexpr int kTileRows = 16;

// Where the rows of a tile are: lane r reads row min(r, last_row) (last_row < 15 only for the
// rows left over after the full tiles).
// The offsets are computed once per tile, so that the block loop only adds them.
struct TileRows {
  TileRows(const uint8_t* row_o, size_t stride, int last_row)
      : first(row_o), next_tile(kTileRows * stride) {
    for (int r = 0; r < kTileRows; ++r)
      offset[r] = static_cast<size_t>(r < last_row ? r : last_row) * stride;
    const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    row_offsets = _mm512_mullo_epi32(_mm512_min_epi32(lanes, _mm512_set1_epi32(last_row)),
                                     _mm512_set1_epi32(static_cast<int>(stride)));
  }
  const uint8_t* row(int r) const { return first + offset[r]; }
  // The same bytes of the next tile's row r. Weights stream from memory once per token; the
  // hardware prefetcher alone does not keep 16 interleaved row streams going, so each block
  // asks for the next tile's copy of it: that tile then finds its rows in the cache.
  const uint8_t* next_tile_row(int r) const { return first + offset[r] + next_tile; }

  const uint8_t* first;  // row o's current block
  size_t next_tile;      // bytes from a row to the same row of the next tile
  size_t offset[kTileRows];
  __m512i row_offsets;  // lane r: offset[r] (for gathers)
};

// 16 bytes at `offset` of rows g, g + 4, g + 8, g + 12, in the four 128-bit chunks.
inline __m512i load_row_quad(const TileRows& rows, size_t offset, int g) {
  auto load = [&](int r) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows.row(r) + offset));
  };
  __m512i z = _mm512_castsi128_si512(load(g));
  z = _mm512_inserti32x4(z, load(g + 4), 1);
  z = _mm512_inserti32x4(z, load(g + 8), 2);
  return _mm512_inserti32x4(z, load(g + 12), 3);
}

// A 4 x 4 transpose of dwords inside each 128-bit chunk c, where z[g] chunk c holds 16 bytes of
// row g + 4c: t[k] lane r = bytes 4k .. 4k+3 of row r (dword k of chunk c of z[g] goes to lane
// 4c + g of t[k]).
inline void transpose_quads(const __m512i z[4], __m512i t[4]) {
  const __m512i a0 = _mm512_unpacklo_epi32(z[0], z[1]), a1 = _mm512_unpackhi_epi32(z[0], z[1]);
  const __m512i a2 = _mm512_unpacklo_epi32(z[2], z[3]), a3 = _mm512_unpackhi_epi32(z[2], z[3]);
  t[0] = _mm512_unpacklo_epi64(a0, a2);
  t[1] = _mm512_unpackhi_epi64(a0, a2);
  t[2] = _mm512_unpacklo_epi64(a1, a3);
  t[3] = _mm512_unpackhi_epi64(a1, a3);
}

// The 16 bytes at `offset` of the 16 rows, transposed: t[k] lane r = bytes 4k .. 4k+3 of row r.
inline void load_transposed(const TileRows& rows, size_t offset, __m512i t[4]) {
  const __m512i z[4] = {load_row_quad(rows, offset, 0), load_row_quad(rows, offset, 1),
                        load_row_quad(rows, offset, 2), load_row_quad(rows, offset, 3)};
  transpose_quads(z, t);
}

// The same for a full tile (16 distinct rows `stride` bytes apart from `row0`), addressed from
// four row pointers and multiples of 4 * stride rather than from sixteen offsets: the offsets do
// not fit the general-purpose registers, and reloading them costs a load per row.
inline void load_transposed_full(const uint8_t* row0, size_t stride, __m512i t[4]) {
  const size_t s4 = 4 * stride;
  __m512i z[4];
  for (int g = 0; g < 4; ++g) {
    const uint8_t* p = row0 + static_cast<size_t>(g) * stride;
    auto load = [](const uint8_t* q) {
      return _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
    };
    z[g] = _mm512_castsi128_si512(load(p));
    z[g] = _mm512_inserti32x4(z[g], load(p + s4), 1);
    z[g] = _mm512_inserti32x4(z[g], load(p + 2 * s4), 2);
    z[g] = _mm512_inserti32x4(z[g], load(p + 3 * s4), 3);
  }
  transpose_quads(z, t);
}

// The 4 bytes at `offset` of each row, as a dword per lane.
inline __m512i gather_dwords(const TileRows& rows, size_t offset) {
  return _mm512_i32gather_epi32(rows.row_offsets, rows.first + offset, 1);
}

}  // namespace trellis::kernels_detail::avx512
