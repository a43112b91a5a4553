// What the per-head attention kernels of the scalar, AVX2 and NEON variants share: the softmax
// weights of a row's scores; for the SIMD ones, the kernel itself over their vector operations,
// and the choice of its instance for the layout's key and value types. Internal linkage: each
// variant's file compiles its own copy with its own instruction set (an inline function merged
// across files compiled for different ISAs could run one ISA's code on a CPU without it; see
// x86/avx2_util.h), hence no std:: templates either.
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/attention.h"
#include "kernels/matmul_internal.h"
#include "kv/kv_storage.h"

namespace trellis::kernels_detail {
namespace {

// scores[0, n) become exp(score - max_score) in place; returns 1 / (their sum + exp(sink -
// max_score)) (sink -infinity: none) and, when `lse` is set (a piece of a split row, which has
// no sink), writes max_score + log(that sum) there.
inline float softmax_weights(float* scores, int64_t n, float max_score, float sink, float* lse) {
  float sum = expf(sink - max_score);  // 0 without a sink
  for (int64_t i = 0; i < n; ++i) {
    scores[i] = expf(scores[i] - max_score);
    sum += scores[i];
  }
  if (lse != nullptr) *lse = max_score + logf(sum);
  return 1.0f / sum;
}

// The largest head a SIMD per-head kernel takes: its query and output stay in registers.
constexpr int64_t kAttendSimdMaxHeadDim = 256;

// One query head against positions [first_position, position] of one kv head (an
// AttendHeadKernel) for a SIMD variant whose vector operations `Ops` gives:
//   Vec, kLanes; load<T>(row, i): elements [kLanes i, kLanes (i + 1)) of a row stored as T, as
//   f32; load_f32, store, zero; mul(a, b); fma(a, b, acc) = a b + acc and fma_scalar(acc, v, p)
//   = acc + v p, both fused; sum(v): the lanes' sum in a fixed order.
// Keys and values are widened as they are read (no dequantized copy). Precondition: head_dim is a
// multiple of kLanes, at most kAttendSimdMaxHeadDim.
template <class Ops, KvType kKey, KvType kValue>
void attend_head_simd(const KvStorage& kv, int64_t layer, int64_t kv_head, const AttentionRow& row,
                      const float* q, float* out, float* scores, float sink) {
  using Vec = typename Ops::Vec;
  const KvLayout& layout = kv.layout();
  const int64_t head_dim = layout.head_dim;
  const int64_t n_vec = head_dim / Ops::kLanes;
  const int32_t block_size = layout.block_size;
  // (kv_row_bytes, not KvLayout's inline members: see x86/avx2_util.h on inline functions.)
  const size_t key_row_bytes = kv_row_bytes(kKey, head_dim);
  const size_t value_row_bytes = kv_row_bytes(kValue, head_dim);
  const int64_t first = row.first_position;
  const int64_t n_pos = static_cast<int64_t>(row.position) + 1;
  const float scale = 1.0f / sqrtf(static_cast<float>(head_dim));

  Vec qv[kAttendSimdMaxHeadDim / Ops::kLanes];
  for (int64_t i = 0; i < n_vec; ++i) qv[i] = Ops::load_f32(q + Ops::kLanes * i);

  // Scores, block by block through the table: positions [j, j + n) lie in one block, from slot
  // j % block_size; scores[i] holds position first + i.
  float max_score = sink;
  for (int64_t j = first; j < n_pos;) {
    const uint8_t* keys = kv.keys(row.block_table[j / block_size], layer, kv_head);
    const int64_t slot = j % block_size;
    const int64_t n = n_pos - j < block_size - slot ? n_pos - j : block_size - slot;
    for (int64_t s = 0; s < n; ++s) {
      const uint8_t* k = keys + static_cast<size_t>(slot + s) * key_row_bytes;
      Vec acc = Ops::mul(qv[0], Ops::template load<kKey>(k, 0));
      for (int64_t i = 1; i < n_vec; ++i)
        acc = Ops::fma(qv[i], Ops::template load<kKey>(k, i), acc);
      const float score = Ops::sum(acc) * scale;
      scores[j - first + s] = score;
      max_score = score > max_score ? score : max_score;
    }
    j += n;
  }
  const float inv_sum = softmax_weights(scores, n_pos - first, max_score, sink, row.lse);

  Vec acc[kAttendSimdMaxHeadDim / Ops::kLanes];
  for (int64_t i = 0; i < n_vec; ++i) acc[i] = Ops::zero();
  for (int64_t j = first; j < n_pos;) {
    const uint8_t* values = kv.values(row.block_table[j / block_size], layer, kv_head);
    const int64_t slot = j % block_size;
    const int64_t n = n_pos - j < block_size - slot ? n_pos - j : block_size - slot;
    for (int64_t s = 0; s < n; ++s) {
      const float p = scores[j - first + s] * inv_sum;
      const uint8_t* v = values + static_cast<size_t>(slot + s) * value_row_bytes;
      for (int64_t i = 0; i < n_vec; ++i)
        acc[i] = Ops::fma_scalar(acc[i], Ops::template load<kValue>(v, i), p);
    }
    j += n;
  }
  for (int64_t i = 0; i < n_vec; ++i) Ops::store(out + Ops::kLanes * i, acc[i]);
}

// attend_head_simd<Ops> for the key type kKey and the value type `value`.
template <class Ops, KvType kKey>
AttendHeadKernel attend_head_for_values(KvType value) {
  switch (value) {
    case KvType::F16:
      return attend_head_simd<Ops, kKey, KvType::F16>;
    case KvType::F32:
      return attend_head_simd<Ops, kKey, KvType::F32>;
    case KvType::Q8_0:
      return attend_head_simd<Ops, kKey, KvType::Q8_0>;
    case KvType::Q4_0:
      return attend_head_simd<Ops, kKey, KvType::Q4_0>;
  }
  return nullptr;
}

// attend_head_simd<Ops> for `types`: an instance for each pair reads both rows in registers with
// no run-time type test per element.
template <class Ops>
AttendHeadKernel attend_head_for(const KvTypes& types) {
  switch (types.key) {
    case KvType::F16:
      return attend_head_for_values<Ops, KvType::F16>(types.value);
    case KvType::F32:
      return attend_head_for_values<Ops, KvType::F32>(types.value);
    case KvType::Q8_0:
      return attend_head_for_values<Ops, KvType::Q8_0>(types.value);
    case KvType::Q4_0:
      return attend_head_for_values<Ops, KvType::Q4_0>(types.value);
  }
  return nullptr;
}

}  // namespace
}  // namespace trellis::kernels_detail
