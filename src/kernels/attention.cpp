#include "kernels/attention.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "kernels/matmul_internal.h"
#include "quant/half.h"

namespace trellis {
namespace {

constexpr int64_t kMinParallelWork = 1 << 15;  // multiply-adds below which one thread is faster

// Reads element `i` of a run of f16 or f32 values.
inline float load(const uint8_t* run, int64_t i, KvType type) {
  if (type == KvType::F32) {
    float v;
    std::memcpy(&v, run + i * 4, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, run + i * 2, 2);
  return f16_to_f32(h);
}

inline void store(uint8_t* run, int64_t i, KvType type, float v) {
  if (type == KvType::F32) {
    std::memcpy(run + i * 4, &v, 4);
  } else {
    uint16_t h = f32_to_f16(v);
    std::memcpy(run + i * 2, &h, 2);
  }
}

}  // namespace

namespace kernels_detail {

// One query head against positions [first_position, position] of one kv head; scores[i] holds
// position first_position + i.
void attend_head_scalar(const KvStorage& kv, int64_t layer, int64_t kv_head,
                        const AttentionRow& row, const float* q, float* out, float* scores) {
  const KvLayout& layout = kv.layout();
  const int64_t head_dim = layout.head_dim;
  const int32_t block_size = layout.block_size;
  const size_t elem = layout.element_bytes();
  const int64_t first = row.first_position;
  const int64_t n_pos = static_cast<int64_t>(row.position) + 1;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));

  float max_score = -INFINITY;
  for (int64_t j = first; j < n_pos; ++j) {
    const int32_t block = row.block_table[j / block_size];
    const uint8_t* k = kv.keys(block, layer, kv_head) +
                       static_cast<size_t>(j % block_size) * static_cast<size_t>(head_dim) * elem;
    float dot = 0.0f;
    for (int64_t d = 0; d < head_dim; ++d) dot += q[d] * load(k, d, layout.type);
    scores[j - first] = dot * scale;
    max_score = std::max(max_score, scores[j - first]);
  }
  float sum = 0.0f;
  for (int64_t j = first; j < n_pos; ++j) {
    scores[j - first] = std::exp(scores[j - first] - max_score);
    sum += scores[j - first];
  }
  const float inv_sum = 1.0f / sum;
  std::fill(out, out + head_dim, 0.0f);
  for (int64_t j = first; j < n_pos; ++j) {
    const int32_t block = row.block_table[j / block_size];
    const uint8_t* v = kv.values(block, layer, kv_head) +
                       static_cast<size_t>(j % block_size) * static_cast<size_t>(head_dim) * elem;
    const float p = scores[j - first] * inv_sum;
    for (int64_t d = 0; d < head_dim; ++d) out[d] += p * load(v, d, layout.type);
  }
}

}  // namespace kernels_detail

float* AttentionScratch::scores(int thread, int64_t n) {
  if (per_thread_.size() <= static_cast<size_t>(thread))
    per_thread_.resize(static_cast<size_t>(thread) + 1);
  std::vector<float>& buf = per_thread_[static_cast<size_t>(thread)];
  if (buf.size() < static_cast<size_t>(n)) buf.resize(static_cast<size_t>(n));
  return buf.data();
}

void AttentionScratch::reserve(int n_threads, int64_t n) {
  for (int t = 0; t < n_threads; ++t) scores(t, n);
}

void kv_write(KvStorage& kv, int64_t layer, const AttentionRow& row, const float* k,
              const float* v) {
  const KvLayout& layout = kv.layout();
  const int32_t block = row.block_table[row.position / layout.block_size];
  const int64_t slot = row.position % layout.block_size;
  const size_t elem = layout.element_bytes();
  for (int64_t h = 0; h < layout.n_kv_heads; ++h) {
    uint8_t* k_run = kv.keys(block, layer, h) + static_cast<size_t>(slot * layout.head_dim) * elem;
    uint8_t* v_run =
        kv.values(block, layer, h) + static_cast<size_t>(slot * layout.head_dim) * elem;
    for (int64_t d = 0; d < layout.head_dim; ++d) {
      store(k_run, d, layout.type, k[h * layout.head_dim + d]);
      store(v_run, d, layout.type, v[h * layout.head_dim + d]);
    }
  }
}

void paged_attention(const KvStorage& kv, int64_t layer, const AttentionRow* rows, int64_t n_rows,
                     int64_t n_head, const float* q, float* out, ThreadPool& pool,
                     AttentionScratch& scratch) {
  paged_attention(best_kernel_isa(), kv, layer, rows, n_rows, n_head, q, out, pool, scratch);
}

void paged_attention(KernelIsa isa, const KvStorage& kv, int64_t layer, const AttentionRow* rows,
                     int64_t n_rows, int64_t n_head, const float* q, float* out, ThreadPool& pool,
                     AttentionScratch& scratch) {
  assert(kernel_isa_supported(isa));
  const int64_t head_dim = kv.layout().head_dim;
  const int64_t group = n_head / kv.layout().n_kv_heads;
  int32_t max_position = 0;
  for (int64_t r = 0; r < n_rows; ++r) max_position = std::max(max_position, rows[r].position);
  // Reserve every thread's buffer before the parallel region (no allocation inside it).
  for (int t = 0; t < pool.size(); ++t) scratch.scores(t, max_position + 1);
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
  auto task = [&](int thread, int64_t begin, int64_t end) {
    float* scores = scratch.scores(thread, max_position + 1);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t r = item / n_head;
      const int64_t h = item % n_head;
      const int64_t offset = (r * n_head + h) * head_dim;
      attend(kv, layer, h / group, rows[r], q + offset, out + offset, scores);
    }
  };
  if (work < kMinParallelWork) {
    task(0, 0, n_rows * n_head);
  } else {
    pool.parallel_chunks(n_rows * n_head, 1, task);
  }
}

}  // namespace trellis
