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

}  // namespace kernels_detail

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

void AttentionScratch::reserve(int n_threads, const KvLayout& layout, int64_t n_head,
                               int64_t n_ctx) {
  // What the per-group kernels ask for, which covers the per-head ones (paged_attention).
  // Rows longer than the split size are computed in pieces of it.
  const AttentionRow last{static_cast<int32_t>(std::min(n_ctx, kAttentionSplitPositions) - 1),
                          nullptr};
  const int64_t n =
      kernels_detail::attend_group_scratch_floats(layout, n_head / layout.n_kv_heads, last);
  for (int t = 0; t < n_threads; ++t) scores(t, n);
  if (n_ctx > kAttentionSplitPositions) {
    const int64_t max_pieces = (n_ctx - 1) / kAttentionSplitPositions + 1;
    pieces(std::max(piece_floats_, max_pieces * n_head * (layout.head_dim + 1)));
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
  int64_t group;                                   // query heads per kv head
  int64_t heads_per_item;

  int64_t head_dim() const { return kv.layout().head_dim; }
  int64_t items_per_row() const { return n_head / heads_per_item; }
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
  const AttentionCall call{kv,    layer,  rows,         n_rows, n_head,        q,
                           sinks, attend, attend_group, group,  heads_per_item};
  const int64_t scratch_floats = kernels_detail::attend_group_scratch_floats(
      kv.layout(), heads_per_item,
      AttentionRow{std::min<int32_t>(max_position, kAttentionSplitPositions - 1), nullptr});
  // Reserve every buffer before the parallel regions (no allocation inside them).
  for (int t = 0; t < pool.size(); ++t) scratch.scores(t, scratch_floats);
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
  const int64_t per_row = call.items_per_row();

  // Rows computed whole, straight into `out`.
  parallel(n_rows * per_row, [&](int64_t item, float* buffer) {
    const int64_t r = item / per_row;
    if (pieces_of(rows[r]) > 1) return;
    const int64_t h = item % per_row * heads_per_item;
    call.run(rows[r], r, h, out + (r * n_head + h) * head_dim, buffer, true);
  });
  if (max_pieces == 1) return;

  // Split rows, in waves of consecutive rows whose pieces fit the scratch: each row's region holds
  // max_pieces x n_head outputs, then as many log-sum-exps.
  const int64_t row_floats = max_pieces * n_head * (head_dim + 1);
  const int64_t wave_rows =
      std::max<int64_t>(1, std::min<int64_t>(n_rows, scratch.piece_floats() / row_floats));
  float* pieces = scratch.pieces(wave_rows * row_floats);
  const int64_t lse_offset = max_pieces * n_head * head_dim;
  for (int64_t r0 = 0; r0 < n_rows; r0 += wave_rows) {
    const int64_t n_wave = std::min(wave_rows, n_rows - r0);
    parallel(n_wave * max_pieces * per_row, [&](int64_t item, float* buffer) {
      const int64_t r = r0 + item / (max_pieces * per_row);
      const int64_t p = item / per_row % max_pieces;
      if (pieces_of(rows[r]) == 1 || p >= pieces_of(rows[r])) return;
      const int64_t h = item % per_row * heads_per_item;
      float* region = pieces + (r - r0) * row_floats;
      const AttentionRow piece = piece_of(rows[r], p, region + lse_offset + p * n_head + h);
      call.run(piece, r, h, region + (p * n_head + h) * head_dim, buffer, false);
    });
    parallel(n_wave * n_head, [&](int64_t item, float*) {
      const int64_t r = r0 + item / n_head;
      const int64_t h = item % n_head;
      if (pieces_of(rows[r]) == 1) return;
      const float* region = pieces + (r - r0) * row_floats;
      merge_pieces(region + h * head_dim, region + lse_offset + h, pieces_of(rows[r]), n_head,
                   head_dim, sinks != nullptr ? sinks[h] : -INFINITY,
                   out + (r * n_head + h) * head_dim);
    });
  }
}

}  // namespace trellis
