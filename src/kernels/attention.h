// Causal attention over a block-paged KV cache, grouped-query heads.
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/kernel_isa.h"
#include "kv/kv_storage.h"

namespace trellis {

// One query row: its position p and the block table through which it reads positions
// [first_position, p] (0 unless a sliding window hides the older ones).
struct AttentionRow {
  int32_t position;
  const int32_t* block_table;
  int32_t first_position = 0;  // precondition: 0 <= first_position <= position
  // Set by paged_attention on the pieces of a split row (see below), for the kernels: where they
  // write each head's log of the sum of exp(score) over the row's positions (no sink with it).
  float* lse = nullptr;
};

// Rows that read more than this many positions are split into pieces at the multiples of it (as
// flash-decoding does), computed in parallel and merged in a fixed order, so that one long
// sequence keeps every thread busy. Whether and where a row is split depends on its own positions
// only, never on the batch or the threads.
constexpr int64_t kAttentionSplitPositions = 1024;

// Per-thread buffers for attention scores, sized for the longest context once, and the pieces of
// split rows.
class AttentionScratch {
 public:
  // What the pieces of one call's split rows are computed in at once, at most (a call takes them
  // in turns of this many floats, or one row's when that is more).
  static constexpr int64_t kPieceFloats = int64_t{1} << 20;
  explicit AttentionScratch(int64_t piece_floats = kPieceFloats) : piece_floats_(piece_floats) {}

  int64_t piece_floats() const { return piece_floats_; }
  float* scores(int thread, int64_t n);  // grows only when n exceeds what that thread holds
  float* pieces(int64_t n);              // grows only when n exceeds what it holds
  int64_t* tiles(int64_t n);             // the same, for where a call's tiles of rows begin
  // Sizes every buffer up front for attention of n_head query heads over up to n_ctx positions
  // of `layout`, in calls of up to max_rows rows, so that paged_attention within those never
  // allocates.
  void reserve(int n_threads, const KvLayout& layout, int64_t n_head, int64_t n_ctx,
               int32_t max_rows);

 private:
  int64_t piece_floats_;
  std::vector<std::vector<float>> per_thread_;
  std::vector<float> pieces_;
  std::vector<int64_t> tiles_;
};

// Writes the key and value of one token (n_kv_heads x head_dim f32 each) into its slot.
void kv_write(KvStorage& kv, int64_t layer, const AttentionRow& row, const float* k,
              const float* v);

// For every row r and query head h (kv head h / (n_head / n_kv_heads)):
//   out[r][h] = sum_j softmax_j(q[r][h] . K[j] * scale) V[j],  j in [first_position_r, position_r]
// with scale = 1 / sqrt(head_dim). With `sinks` (n_head logits, gpt-oss's attention sinks), head
// h's softmax has one more term in its denominator, exp(sinks[h]), that weighs no value:
//   softmax_j = exp(s_j - m) / (sum_i exp(s_i - m) + exp(sinks[h] - m)),  m = max(max_i s_i,
//   sinks[h]).
// q: [n_rows][n_head * head_dim], out: same shape. A row of more than kAttentionSplitPositions
// positions is computed in pieces (the positions between consecutive multiples of it), each
// (piece, head) by one thread, then merged by their log-sum-exp in piece order; a shorter row's
// (row, head) by one thread. Consecutive rows of one sequence (a prefill chunk) may be computed
// as a tile, which reads each key and value once for all its rows, with every row's bits the same
// as alone. Either way results do not depend on the batch or the thread count.
// Runs the fastest variant (best_kernel_isa()).
void paged_attention(const KvStorage& kv, int64_t layer, const AttentionRow* rows, int64_t n_rows,
                     int64_t n_head, const float* q, float* out, ThreadPool& pool,
                     AttentionScratch& scratch, const float* sinks = nullptr);
// The same with an explicit variant (tests and benchmarks); precondition:
// kernel_isa_supported(isa). Head sizes the variant has no kernel for take the scalar one. Unlike
// matmul, variants round differently (AVX2 fuses multiply-adds and sums each dot product in eight
// lanes), so they agree with SCALAR within a bound, not bit for bit (tests/unit/kernels/
// attention_test.cpp states it); within one variant the batch and thread invariance hold.
void paged_attention(KernelIsa isa, const KvStorage& kv, int64_t layer, const AttentionRow* rows,
                     int64_t n_rows, int64_t n_head, const float* q, float* out, ThreadPool& pool,
                     AttentionScratch& scratch, const float* sinks = nullptr);

}  // namespace trellis
