#include "kernels/attention.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

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
  float sum = std::exp(sink - max_score);  // 0 without a sink
  for (int64_t j = first; j < n_pos; ++j) {
    scores[j - first] = std::exp(scores[j - first] - max_score);
    sum += scores[j - first];
  }
  const float inv_sum = 1.0f / sum;
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
  const AttentionRow last{static_cast<int32_t>(n_ctx - 1), nullptr};
  const int64_t n =
      kernels_detail::attend_group_scratch_floats(layout, n_head / layout.n_kv_heads, last);
  for (int t = 0; t < n_threads; ++t) scores(t, n);
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

void paged_attention(KernelIsa isa, const KvStorage& kv, int64_t layer, const AttentionRow* rows,
                     int64_t n_rows, int64_t n_head, const float* q, float* out, ThreadPool& pool,
                     AttentionScratch& scratch, const float* sinks) {
  assert(kernel_isa_supported(isa));
  const int64_t head_dim = kv.layout().head_dim;
  const int64_t group = n_head / kv.layout().n_kv_heads;
  int32_t max_position = 0;
  for (int64_t r = 0; r < n_rows; ++r) max_position = std::max(max_position, rows[r].position);
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
  const int64_t scratch_floats = kernels_detail::attend_group_scratch_floats(
      kv.layout(), heads_per_item, AttentionRow{max_position, nullptr});
  // Reserve every thread's buffer before the parallel region (no allocation inside it).
  for (int t = 0; t < pool.size(); ++t) scratch.scores(t, scratch_floats);
  auto task = [&](int thread, int64_t begin, int64_t end) {
    float* buffer = scratch.scores(thread, scratch_floats);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t r = item / (n_head / heads_per_item);
      const int64_t h = item % (n_head / heads_per_item) * heads_per_item;
      const int64_t offset = (r * n_head + h) * head_dim;
      if (attend_group != nullptr) {
        attend_group(kv, layer, h / group, rows[r], q + offset, group, out + offset, buffer,
                     sinks != nullptr ? sinks + h : nullptr);
      } else {
        attend(kv, layer, h / group, rows[r], q + offset, out + offset, buffer,
               sinks != nullptr ? sinks[h] : -INFINITY);
      }
    }
  };
  const int64_t n_items = n_rows * (n_head / heads_per_item);
  if (work < kMinParallelWork) {
    task(0, 0, n_items);
  } else {
    pool.parallel_chunks(n_items, 1, task);
  }
}

}  // namespace trellis
