// The row x token tiling shared by the SIMD kernels (a header-only template: each ISA's files
// instantiate it with their own kernels, so no code compiled for one ISA is shared with another).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/matmul_internal.h"

namespace trellis::kernels_detail {

// The operands of one R x T tile: w[r] is weight row o + r, x[t] the activation row of token
// t0 + t.
template <int R, int T>
struct Tile {
  const uint8_t* w[R];
  const uint8_t* x[T];
};

// Runs Kernel<R, T> on the tile of rows o .. o+R-1 and tokens t0 .. t0+T-1, then stores its
// results (out[r][t]: row o + r, token t0 + t) into a.out. (Each instance belongs to one ISA's
// kernels, as drive_tiles does; Tile has no code of its own.)
template <template <int, int> class Kernel, int R, int T>
void run_tile(const MatmulArgs& a, int64_t o, int64_t t0) {
  Tile<R, T> tile;
  for (int r = 0; r < R; ++r) tile.w[r] = a.w + static_cast<size_t>(o + r) * a.w_row_bytes;
  for (int t = 0; t < T; ++t) tile.x[t] = a.act + static_cast<size_t>(t0 + t) * a.act_row_bytes;
  float out[R][T];
  Kernel<R, T>::run(a, tile, out);
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) a.out[(t0 + t) * a.n_out + o + r] = out[r][t];
}

// Kernel<R, T>::run(args, tile, out) computes the R x T outputs of a tile (see run_tile). Every
// element's arithmetic is the same whatever R and T are, so the tiling never changes a result.
// Batches of fewer than T tokens use R1 x 1 tiles (decode); others R x T tiles,
// with R x 1 tiles for the leftover tokens and 1 x T / 1 x 1 tiles for the leftover rows.
// Loop order: a tile's R weight rows stay in L1 while all token tiles pass over them.
template <template <int, int> class Kernel, int R, int T, int R1>
void drive_tiles(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.n_tokens < T) {
    int64_t o = row_begin;
    for (; o + R1 <= row_end; o += R1) {
      for (int64_t t = 0; t < a.n_tokens; ++t) run_tile<Kernel, R1, 1>(a, o, t);
    }
    for (; o < row_end; ++o) {
      for (int64_t t = 0; t < a.n_tokens; ++t) run_tile<Kernel, 1, 1>(a, o, t);
    }
    return;
  }
  int64_t o = row_begin;
  for (; o + R <= row_end; o += R) {
    int64_t t = 0;
    for (; t + T <= a.n_tokens; t += T) run_tile<Kernel, R, T>(a, o, t);
    for (; t < a.n_tokens; ++t) run_tile<Kernel, R, 1>(a, o, t);
  }
  for (; o < row_end; ++o) {
    int64_t t = 0;
    for (; t + T <= a.n_tokens; t += T) run_tile<Kernel, 1, T>(a, o, t);
    for (; t < a.n_tokens; ++t) run_tile<Kernel, 1, 1>(a, o, t);
  }
}

}  // namespace trellis::kernels_detail
