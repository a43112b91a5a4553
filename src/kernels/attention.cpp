#include "kernels/attention.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "kernels/attend_head_common.h"
#include "kernels/kv_codec.h"
#include "kernels/matmul_internal.h"

namespace trellis {
namespace {

constexpr int64_t kMinParallelWork = 1 << 15;  // multiply-adds below which one thread is faster

// A tile takes at most this many queries (rows x query heads per kv head): their scores stay in
// the core's cache.
constexpr int64_t kTileQueries = 64;
// Below this many queries, transposing the keys for a tile costs more than the per-row kernels'
// sums across lanes: the rows go alone.
constexpr int64_t kMinTileQueries = 16;

// The most rows a tile holds for `group` query heads per kv head (1: no tiles).
int64_t max_tile_rows(int64_t group) {
  return std::max<int64_t>(1, kTileQueries / group);
}

}  // namespace

namespace kernels_detail {

// One query head against positions [first_position, position] of one kv head; scores[i] holds
// position first_position + i.
void attend_head_scalar(const KvStorage& kv, int64_t layer, int64_t kv_head,
                        const AttentionRow& row, const float* q, float* out, float* scores,
                        float sink) {
  const KvLayout& layout = kv.layout();
  const int64_t head_dim = layout.head_dim;
  const int32_t block_size = layout.block_size;
  const int64_t first = row.first_position;
  const int64_t n_pos = static_cast<int64_t>(row.position) + 1;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  float* decoded = scores + (n_pos - first);  // one key or value row as f32

  float max_score = sink;
  for (int64_t j = first; j < n_pos; ++j) {
    const int32_t block = row.block_table[j / block_size];
    kv_decode_row(layout.types.key,
                  kv.keys(block, layer, kv_head) +
                      static_cast<size_t>(j % block_size) * layout.key_row_bytes(),
                  decoded, head_dim);
    float dot = 0.0f;
    for (int64_t d = 0; d < head_dim; ++d) dot += q[d] * decoded[d];
    scores[j - first] = dot * scale;
    max_score = std::max(max_score, scores[j - first]);
  }
  // Only the positions' scores: the decoded row lives after them.
  const float inv_sum = softmax_weights(scores, n_pos - first, max_score, sink, row.lse);
  std::fill(out, out + head_dim, 0.0f);
  for (int64_t j = first; j < n_pos; ++j) {
    const int32_t block = row.block_table[j / block_size];
    kv_decode_row(layout.types.value,
                  kv.values(block, layer, kv_head) +
                      static_cast<size_t>(j % block_size) * layout.value_row_bytes(),
                  decoded, head_dim);
    const float p = scores[j - first] * inv_sum;
    for (int64_t d = 0; d < head_dim; ++d) out[d] += p * decoded[d];
  }
}

int64_t attend_group_scratch_floats(const KvLayout& layout, int64_t n_q, const AttentionRow& row) {
  return n_q * (row.position + 1 - row.first_position + layout.head_dim) +
         layout.block_size * layout.head_dim;
}

// The outputs' sums, one chunk of 16 keys or values and its transpose, the queries in blocks of
// 4, and each query's scores with 16 floats of room on either side (see
// x86/avx512/attention_tile_avx512.cpp).
int64_t attend_tile_scratch_floats(const KvLayout& layout, int64_t n_queries) {
  const int64_t blocks_of_4 = (n_queries + 3) / 4 * 4;
  return (n_queries + 2 * 16 + blocks_of_4) * layout.head_dim +
         n_queries * (kAttentionSplitPositions + 2 * 16);
}

}  // namespace kernels_detail

int64_t* AttentionScratch::tiles(int64_t n) {
  if (tiles_.size() < static_cast<size_t>(n)) tiles_.resize(static_cast<size_t>(n));
  return tiles_.data();
}

float* AttentionScratch::pieces(int64_t n) {
  if (pieces_.size() < static_cast<size_t>(n)) pieces_.resize(static_cast<size_t>(n));
  return pieces_.data();
}

float* AttentionScratch::scores(int thread, int64_t n) {
  if (per_thread_.size() <= static_cast<size_t>(thread))
    per_thread_.resize(static_cast<size_t>(thread) + 1);
  std::vector<float>& buf = per_thread_[static_cast<size_t>(thread)];
  if (buf.size() < static_cast<size_t>(n)) buf.resize(static_cast<size_t>(n));
  return buf.data();
}

void AttentionScratch::reserve(int n_threads, const KvLayout& layout, int64_t n_head, int64_t n_ctx,
                               int32_t max_rows) {
  tiles(int64_t{max_rows} + 1);  // where each call's tiles of rows begin
  // What the per-group kernels ask for, which covers the per-head ones, and what a tile of rows
  // asks for (paged_attention). Rows longer than the split size are computed in pieces of it.
  const int64_t group = n_head / layout.n_kv_heads;
  const AttentionRow last{static_cast<int32_t>(std::min(n_ctx, kAttentionSplitPositions) - 1),
                          nullptr};
  const int64_t tile_rows = max_tile_rows(group);
  int64_t n = kernels_detail::attend_group_scratch_floats(layout, group, last);
  if (tile_rows > 1) {
    n = std::max(n, kernels_detail::attend_tile_scratch_floats(layout, tile_rows * group));
  }
  for (int t = 0; t < n_threads; ++t) scores(t, n);
  if (n_ctx > kAttentionSplitPositions) {
    const int64_t max_pieces = (n_ctx - 1) / kAttentionSplitPositions + 1;
    pieces(std::max(piece_floats_, tile_rows * max_pieces * n_head * (layout.head_dim + 1)));
  }
}

void kv_write(KvStorage& kv, int64_t layer, const AttentionRow& row, const float* k,
              const float* v) {
  const KvLayout& layout = kv.layout();
  const int32_t block = row.block_table[row.position / layout.block_size];
  const auto slot = static_cast<size_t>(row.position % layout.block_size);
  for (int64_t h = 0; h < layout.n_kv_heads; ++h) {
    kv_encode_row(layout.types.key, k + h * layout.head_dim,
                  kv.keys(block, layer, h) + slot * layout.key_row_bytes(), layout.head_dim);
    kv_encode_row(layout.types.value, v + h * layout.head_dim,
                  kv.values(block, layer, h) + slot * layout.value_row_bytes(), layout.head_dim);
  }
}

void paged_attention(const KvStorage& kv, int64_t layer, const AttentionRow* rows, int64_t n_rows,
                     int64_t n_head, const float* q, float* out, ThreadPool& pool,
                     AttentionScratch& scratch, const float* sinks) {
  paged_attention(best_kernel_isa(), kv, layer, rows, n_rows, n_head, q, out, pool, scratch, sinks);
}

namespace {

// The pieces a row is computed in (see kAttentionSplitPositions): 1 for a short row.
int64_t pieces_of(const AttentionRow& row) {
  constexpr int64_t K = kAttentionSplitPositions;
  if (row.position + 1 - row.first_position <= K) return 1;
  return row.position / K - row.first_position / K + 1;
}

// Piece i of a split row: its positions between two multiples of the split size.
AttentionRow piece_of(const AttentionRow& row, int64_t i, float* lse) {
  constexpr int64_t K = kAttentionSplitPositions;
  const int64_t start = (row.first_position / K + i) * K;
  AttentionRow piece = row;
  piece.first_position = static_cast<int32_t>(std::max<int64_t>(row.first_position, start));
  piece.position = static_cast<int32_t>(std::min<int64_t>(row.position, start + K - 1));
  piece.lse = lse;
  return piece;
}

// One head's output from its pieces' outputs (`stride` floats apart) and log-sum-exps, in piece
// order; the sink (-infinity: none) joins the denominator.
void merge_pieces(const float* outs, const float* lses, int64_t n_pieces, int64_t stride,
                  int64_t head_dim, float sink, float* out) {
  float max_lse = sink;
  for (int64_t p = 0; p < n_pieces; ++p) max_lse = std::max(max_lse, lses[p * stride]);
  float total = std::exp(sink - max_lse);
  for (int64_t p = 0; p < n_pieces; ++p) total += std::exp(lses[p * stride] - max_lse);
  std::fill(out, out + head_dim, 0.0f);
  for (int64_t p = 0; p < n_pieces; ++p) {
    const float w = std::exp(lses[p * stride] - max_lse) / total;
    const float* o = outs + p * stride * head_dim;
    for (int64_t d = 0; d < head_dim; ++d) out[d] += w * o[d];
  }
}

// The arithmetic of one call: the kernels chosen for it and its shapes.
struct AttentionCall {
  const KvStorage& kv;
  int64_t layer;
  const AttentionRow* rows;
  int64_t n_rows;
  int64_t n_head;
  const float* q;
  const float* sinks;
  kernels_detail::AttendHeadKernel attend;
  kernels_detail::AttendGroupKernel attend_group;  // null: one head per item
  kernels_detail::AttendTileKernel attend_tile;    // null: no tiles
  int64_t group;                                   // query heads per kv head
  int64_t heads_per_item;

  int64_t head_dim() const { return kv.layout().head_dim; }
  int64_t items_per_row() const { return n_head / heads_per_item; }
  float sink(int64_t h) const { return sinks != nullptr ? sinks[h] : -INFINITY; }
  // The heads [h, h + heads_per_item) of `row` (row index r for q), into `out`; `with_sinks`
  // false for the pieces of a split row (the merge adds the sinks).
  void run(const AttentionRow& row, int64_t r, int64_t h, float* out, float* buffer,
           bool with_sinks) const {
    const float* qh = q + (r * n_head + h) * head_dim();
    const bool sink = with_sinks && sinks != nullptr;
    if (attend_group != nullptr) {
      attend_group(kv, layer, h / group, row, qh, group, out, buffer, sink ? sinks + h : nullptr);
    } else {
      attend(kv, layer, h / group, row, qh, out, buffer, sink ? sinks[h] : -INFINITY);
    }
  }
};

// A call's rows in tiles: runs of consecutive positions of one sequence (one block table), at
// most `tile_rows` long and, when shorter than a useful tile, of one row each. starts[t] is tile
// t's first row, starts[n_tiles] == n_rows; returns n_tiles.
int64_t make_tiles(const AttentionRow* rows, int64_t n_rows, int64_t tile_rows, int64_t group,
                   int64_t* starts) {
  int64_t n_tiles = 0;
  for (int64_t r = 0; r < n_rows;) {
    int64_t end = r + 1;
    while (end < n_rows && end - r < tile_rows && rows[end].block_table == rows[r].block_table &&
           rows[end].position == rows[end - 1].position + 1) {
      ++end;
    }
    if ((end - r) * group < kMinTileQueries) end = r + 1;
    starts[n_tiles++] = r;
    r = end;
  }
  starts[n_tiles] = n_rows;
  return n_tiles;
}

// The queries of rows [begin, end) for kv head `kv_head` that piece `p` of each row gives (a
// row of one piece only for p == 0, written to `out` with its sink; a split row's piece into
// its region of the wave, from `region`, with its log-sum-exp): what the tile kernel takes.
int64_t tile_queries(const AttentionCall& call, int64_t begin, int64_t end, int64_t p,
                     int64_t kv_head, float* out, float* region, int64_t row_floats,
                     int64_t max_pieces, kernels_detail::TileQuery* queries) {
  const int64_t head_dim = call.head_dim();
  const int64_t lse_offset = max_pieces * call.n_head * head_dim;
  int64_t n = 0;
  for (int64_t r = begin; r < end; ++r) {
    const AttentionRow& row = call.rows[r];
    const int64_t n_pieces = pieces_of(row);
    if (p >= n_pieces) continue;
    const AttentionRow range = n_pieces == 1 ? row : piece_of(row, p, nullptr);
    for (int64_t g = 0; g < call.group; ++g) {
      const int64_t h = kv_head * call.group + g;
      kernels_detail::TileQuery& query = queries[n++];
      query.q = call.q + (r * call.n_head + h) * head_dim;
      query.first = range.first_position;
      query.last = range.position;
      if (n_pieces == 1) {
        query.out = out + (r * call.n_head + h) * head_dim;
        query.lse = nullptr;
        query.sink = call.sink(h);
      } else {
        float* own = region + (r - begin) * row_floats;
        query.out = own + (p * call.n_head + h) * head_dim;
        query.lse = own + lse_offset + p * call.n_head + h;
        query.sink = -INFINITY;
      }
    }
  }
  return n;
}

}  // namespace

void paged_attention(KernelIsa isa, const KvStorage& kv, int64_t layer, const AttentionRow* rows,
                     int64_t n_rows, int64_t n_head, const float* q, float* out, ThreadPool& pool,
                     AttentionScratch& scratch, const float* sinks) {
  assert(kernel_isa_supported(isa));
  const int64_t head_dim = kv.layout().head_dim;
  const int64_t group = n_head / kv.layout().n_kv_heads;
  int32_t max_position = 0;
  int64_t max_pieces = 1;
  for (int64_t r = 0; r < n_rows; ++r) {
    max_position = std::max(max_position, rows[r].position);
    max_pieces = std::max(max_pieces, pieces_of(rows[r]));
  }
  // Small problems run on the calling thread: waking workers would cost more than the work.
  // Either way each (row, head) is computed the same way, so results are identical.
  const int64_t work = n_rows * n_head * (max_position + 1) * head_dim;
  // One variant for the whole call, so every row goes through the same arithmetic.
  const kernels_detail::KernelTable& table = kernels_detail::isa_table(isa);
  kernels_detail::AttendHeadKernel attend = &kernels_detail::attend_head_scalar;
  if (table.attend_head != nullptr && head_dim % table.attend_head_dim_multiple == 0 &&
      head_dim <= table.attend_max_head_dim) {
    attend = table.attend_head;
  }
  // A kernel for a GQA group takes one item per (row, kv head), and reads each run of keys or
  // values once for all the group's heads; either way every head gets the same bits.
  kernels_detail::AttendGroupKernel attend_group = nullptr;
  if (attend == table.attend_head && group > 1) attend_group = table.attend_group;
  const int64_t heads_per_item = attend_group != nullptr ? group : 1;
  // A tile kernel takes one item per (tile of rows, kv head): the same bits again.
  kernels_detail::AttendTileKernel attend_tile = nullptr;
  if (attend == table.attend_head && head_dim % table.attend_tile_dim_multiple == 0 &&
      heads_per_item == group) {
    attend_tile = table.attend_tile;
  }
  const int64_t tile_rows = attend_tile != nullptr ? max_tile_rows(group) : 1;
  const AttentionCall call{kv,    layer,  rows,         n_rows,      n_head, q,
                           sinks, attend, attend_group, attend_tile, group,  heads_per_item};
  int64_t scratch_floats = kernels_detail::attend_group_scratch_floats(
      kv.layout(), heads_per_item,
      AttentionRow{std::min<int32_t>(max_position, kAttentionSplitPositions - 1), nullptr});
  if (tile_rows > 1) {
    scratch_floats = std::max(
        scratch_floats, kernels_detail::attend_tile_scratch_floats(kv.layout(), tile_rows * group));
  }
  // Reserve every buffer before the parallel regions (no allocation inside them).
  for (int t = 0; t < pool.size(); ++t) scratch.scores(t, scratch_floats);
  int64_t* starts = scratch.tiles(n_rows + 1);
  const int64_t n_tiles = make_tiles(rows, n_rows, tile_rows, group, starts);
  auto parallel = [&](int64_t n_items, auto&& body) {
    auto task = [&](int thread, int64_t begin, int64_t end) {
      float* buffer = scratch.scores(thread, scratch_floats);
      for (int64_t item = begin; item < end; ++item) body(item, buffer);
    };
    if (work < kMinParallelWork) {
      task(0, 0, n_items);
    } else {
      pool.parallel_chunks(n_items, 1, task);
    }
  };
  const int64_t per_row = call.items_per_row();  // == the kv heads wherever there are tiles
  auto tile_pieces = [&](int64_t t) {
    int64_t n = 1;
    for (int64_t r = starts[t]; r < starts[t + 1]; ++r) n = std::max(n, pieces_of(rows[r]));
    return n;
  };
  // Piece p of tile t's rows for kv head `kv_head` through the tile kernel (see tile_queries).
  auto run_tile = [&](int64_t t, int64_t p, int64_t kv_head, float* region, int64_t row_floats,
                      float* buffer) {
    kernels_detail::TileQuery queries[kTileQueries];
    const int64_t n = tile_queries(call, starts[t], starts[t + 1], p, kv_head, out, region,
                                   row_floats, max_pieces, queries);
    if (n > 0) attend_tile(kv, layer, kv_head, rows[starts[t]].block_table, queries, n, buffer);
  };

  // Tiles whose rows are all computed whole, straight into `out`.
  parallel(n_tiles * per_row, [&](int64_t item, float* buffer) {
    const int64_t t = item / per_row;
    if (tile_pieces(t) > 1) return;
    if (starts[t + 1] - starts[t] > 1) return run_tile(t, 0, item % per_row, nullptr, 0, buffer);
    const int64_t r = starts[t];
    const int64_t h = item % per_row * heads_per_item;
    call.run(rows[r], r, h, out + (r * n_head + h) * head_dim, buffer, true);
  });
  if (max_pieces == 1) return;

  // Tiles with split rows, in waves of consecutive tiles whose rows' pieces fit the scratch:
  // each row's region holds max_pieces x n_head outputs, then as many log-sum-exps.
  const int64_t row_floats = max_pieces * n_head * (head_dim + 1);
  const int64_t wave_rows =
      std::min<int64_t>(n_rows, std::max<int64_t>(tile_rows, scratch.piece_floats() / row_floats));
  float* pieces = scratch.pieces(wave_rows * row_floats);
  const int64_t lse_offset = max_pieces * n_head * head_dim;
  for (int64_t t0 = 0; t0 < n_tiles;) {
    int64_t t1 = t0 + 1;
    while (t1 < n_tiles && starts[t1 + 1] - starts[t0] <= wave_rows) ++t1;
    const int64_t r0 = starts[t0];
    const int64_t n_wave = starts[t1] - r0;
    parallel((t1 - t0) * max_pieces * per_row, [&](int64_t item, float* buffer) {
      const int64_t t = t0 + item / (max_pieces * per_row);
      const int64_t p = item / per_row % max_pieces;
      if (tile_pieces(t) == 1 || p >= tile_pieces(t)) return;
      float* region = pieces + (starts[t] - r0) * row_floats;
      if (starts[t + 1] - starts[t] > 1) {
        return run_tile(t, p, item % per_row, region, row_floats, buffer);
      }
      const int64_t r = starts[t];
      const int64_t h = item % per_row * heads_per_item;
      const AttentionRow piece = piece_of(rows[r], p, region + lse_offset + p * n_head + h);
      call.run(piece, r, h, region + (p * n_head + h) * head_dim, buffer, false);
    });
    parallel(n_wave * n_head, [&](int64_t item, float*) {
      const int64_t r = r0 + item / n_head;
      const int64_t h = item % n_head;
      if (pieces_of(rows[r]) == 1) return;
      const float* region = pieces + (r - r0) * row_floats;
      merge_pieces(region + h * head_dim, region + lse_offset + h, pieces_of(rows[r]), n_head,
                   head_dim, call.sink(h), out + (r * n_head + h) * head_dim);
    });
    t0 = t1;
  }
}

}  // namespace trellis
