// The row x token tiling shared by the SIMD kernels (a header-only template: each ISA's files
// instantiate it with their own kernels, so no code compiled for one ISA is shared with another).
#pragma once

#include <algorithm>
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

// The tile of rows o .. o+R-1 and tokens t0 .. t0+T-1. Always inlined (never emitted on its own),
// so no copy compiled for one ISA can stand in for another's.
template <int R, int T>
[[gnu::always_inline]] inline Tile<R, T> tile_at(const MatmulArgs& a, int64_t o, int64_t t0) {
  Tile<R, T> tile;
  for (int r = 0; r < R; ++r) tile.w[r] = a.w + static_cast<size_t>(o + r) * a.w_row_bytes;
  for (int t = 0; t < T; ++t) tile.x[t] = a.act + static_cast<size_t>(t0 + t) * a.act_row_bytes;
  return tile;
}

// The activation bytes of one block of tokens (see drive_tiles): small enough to stay in L1 (32 to
// 48 KiB on the CPUs we run on) while the weight rows stream past it from L2.
inline constexpr int64_t kTokenBlockBytes = int64_t{24} << 10;
// The weight rows pass once per block: blocks of fewer tokens than this re-read them more than
// the activations they keep in L1 save (wide rows, whose activations fill L1 in a few tokens).
inline constexpr int64_t kMinBlockTokens = 64;

// Kernel<R, T>::run(args, o, t) computes the R x T outputs (rows o .. o+R-1) x (tokens
// t .. t+T-1). Every element's arithmetic is the same whatever R and T are, so the tiling never
// changes a result. Batches of fewer than T tokens use R1 x 1 tiles (decode); others R x T tiles,
// with R x 1 tiles for the leftover tokens and 1 x T / 1 x 1 tiles for the leftover rows.
// Loop order: the tokens go in blocks of about kTokenBlockBytes of activations (at least
// kMinBlockTokens tokens); within a block, a tile's R weight rows stay in L1 while the block's
// token tiles pass over them. Without the blocks a batch of many tokens, an embedding batch say,
// streamed all of its activations from L2 or L3 once for every R rows (with float weights a
// batch of 3,000 tokens ran 1.4 times slower).
template <template <int, int> class Kernel, int R, int T, int R1>
void drive_tiles(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.n_tokens < T) {
    int64_t o = row_begin;
    for (; o + R1 <= row_end; o += R1) {
      for (int64_t t = 0; t < a.n_tokens; ++t) Kernel<R1, 1>::run(a, o, t);
    }
    for (; o < row_end; ++o) {
      for (int64_t t = 0; t < a.n_tokens; ++t) Kernel<1, 1>::run(a, o, t);
    }
    return;
  }
  const int64_t row_bytes = a.act_row_bytes > 0 ? static_cast<int64_t>(a.act_row_bytes) : 1;
  const int64_t per_block =
      std::max<int64_t>(kMinBlockTokens / T * T, kTokenBlockBytes / row_bytes / T * T);
  for (int64_t block = 0; block < a.n_tokens; block += per_block) {
    const int64_t block_end = std::min(a.n_tokens, block + per_block);
    int64_t o = row_begin;
    for (; o + R <= row_end; o += R) {
      int64_t t = block;
      for (; t + T <= block_end; t += T) Kernel<R, T>::run(a, o, t);
      for (; t < block_end; ++t) Kernel<R, 1>::run(a, o, t);
    }
    for (; o < row_end; ++o) {
      int64_t t = block;
      for (; t + T <= block_end; t += T) Kernel<1, T>::run(a, o, t);
      for (; t < block_end; ++t) Kernel<1, 1>::run(a, o, t);
    }
  }
}

// Kernel<R, left>::run for the last `left` (<= L) tokens, from t.
template <template <int, int> class Kernel, int R, int L>
void run_leftover_tokens(const MatmulArgs& a, int64_t o, int64_t t, int64_t left) {
  if constexpr (L > 0) {
    if (left == L) {
      Kernel<R, L>::run(a, o, t);
    } else {
      run_leftover_tokens<Kernel, R, L - 1>(a, o, t, left);
    }
  }
}

// Tokens [0, n_tokens) of rows o .. o+R-1 in R x T tiles, and an R x L tile for the L left over.
template <template <int, int> class Kernel, int R, int T>
void tokens_in_tiles(const MatmulArgs& a, int64_t o) {
  int64_t t = 0;
  for (; t + T <= a.n_tokens; t += T) Kernel<R, T>::run(a, o, t);
  run_leftover_tokens<Kernel, R, T - 1>(a, o, t, a.n_tokens - t);
}

// Rows [row_begin, row_end) R at a time, then the rows left over one at a time.
template <template <int, int> class Kernel, int R, int T>
void rows_in_tiles(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  int64_t o = row_begin;
  for (; o + R <= row_end; o += R) tokens_in_tiles<Kernel, R, T>(a, o);
  for (; o < row_end; ++o) tokens_in_tiles<Kernel, 1, T>(a, o);
}

// Tiles of at most eight (row, token) pairs, for kernels that keep one accumulator per pair in a
// lane of one register. One token: kDecodeRows x 1 tiles (the rows that decode best together,
// measured per type); more: 1 x 8 tiles, so that a row's decode serves eight tokens.
template <template <int, int> class Kernel, int kDecodeRows>
void drive_pair_tiles(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.n_tokens == 1) {
    rows_in_tiles<Kernel, kDecodeRows, 1>(a, row_begin, row_end);
  } else {
    rows_in_tiles<Kernel, 1, 8>(a, row_begin, row_end);
  }
}

}  // namespace trellis::kernels_detail
