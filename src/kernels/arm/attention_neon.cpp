// NEON paged attention for one query head (an AttendHeadKernel): keys and values are read from
// their f16, f32, q8_0 or q4_0 rows four elements at a time and widened in registers (no
// dequantized copy), products fused (vfmaq), each dot product summed over its four lanes. Like the
// AVX2 kernel it agrees with the scalar one within the bound of tests/unit/kernels/
// attention_test.cpp, not bit for bit; within this kernel the batch and thread invariance hold.
#include <arm_neon.h>

#include <cmath>
#include <cstring>

#include "kernels/arm/kernels_neon.h"
#include "kernels/arm/neon_util.h"
#include "kernels/attention.h"
#include "kv/kv_storage.h"
#include "quant/half.h"

namespace trellis::kernels_detail::neon {
namespace {

// Elements [4 i, 4 i + 4) of one key or value row stored as kType, as f32 (a quantized code
// times its block's scale: kv_decode_row's values).
template <KvType kType>
inline float32x4_t load4(const uint8_t* row, int64_t i) {
  if constexpr (kType == KvType::F32) {
    return vld1q_f32(reinterpret_cast<const float*>(row) + 4 * i);
  } else if constexpr (kType == KvType::F16) {
    uint16_t h[4];
    std::memcpy(h, row + 8 * i, sizeof(h));
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
  } else if constexpr (kType == KvType::Q8_0) {
    const uint8_t* block = row + (4 * i / 32) * 34;  // f16 scale, 32 int8 codes
    uint32_t word;
    std::memcpy(&word, block + 2 + 4 * i % 32, sizeof(word));
    const int16x8_t codes = vmovl_s8(vreinterpret_s8_u32(vdup_n_u32(word)));
    return vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(codes))), f16_to_f32(load_u16(block)));
  } else {
    // q4_0: f16 scale, then 16 bytes: element e < 16 in byte e's low nibble, e >= 16 in byte
    // e - 16's high nibble; a code c stands for c - 8.
    const uint8_t* block = row + (4 * i / 32) * 18;
    const int64_t e = 4 * i % 32;
    uint32_t word;
    std::memcpy(&word, block + 2 + e % 16, sizeof(word));
    const uint8x8_t bytes = vreinterpret_u8_u32(vdup_n_u32(word));
    const uint8x8_t nibbles = e >= 16 ? vshr_n_u8(bytes, 4) : vand_u8(bytes, vdup_n_u8(0x0f));
    const int16x8_t codes = vreinterpretq_s16_u16(vmovl_u8(nibbles));
    const int32x4_t centred = vsubq_s32(vmovl_s16(vget_low_s16(codes)), vdupq_n_s32(8));
    return vmulq_n_f32(vcvtq_f32_s32(centred), f16_to_f32(load_u16(block)));
  }
}

template <KvType kKey, KvType kValue>
void attend_head_typed(const KvStorage& kv, int64_t layer, int64_t kv_head, const AttentionRow& row,
                       const float* q, float* out, float* scores, float sink) {
  const KvLayout& layout = kv.layout();
  const int64_t head_dim = layout.head_dim;
  const int64_t n_vec = head_dim / 4;
  const int32_t block_size = layout.block_size;
  const size_t key_row_bytes = kv_row_bytes(kKey, head_dim);
  const size_t value_row_bytes = kv_row_bytes(kValue, head_dim);
  const int64_t first = row.first_position;
  const int64_t n_pos = static_cast<int64_t>(row.position) + 1;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));

  float32x4_t qv[kAttendNeonMaxHeadDim / 4];
  for (int64_t i = 0; i < n_vec; ++i) qv[i] = vld1q_f32(q + 4 * i);

  // Scores, block by block through the table: positions [j, j + n) lie in one block, from slot
  // j % block_size; scores[i] holds position first + i.
  float max_score = sink;
  for (int64_t j = first; j < n_pos;) {
    const uint8_t* keys = kv.keys(row.block_table[j / block_size], layer, kv_head);
    const int64_t slot = j % block_size;
    const int64_t n = n_pos - j < block_size - slot ? n_pos - j : block_size - slot;
    for (int64_t s = 0; s < n; ++s) {
      const uint8_t* k = keys + static_cast<size_t>(slot + s) * key_row_bytes;
      float32x4_t acc = vmulq_f32(qv[0], load4<kKey>(k, 0));
      for (int64_t i = 1; i < n_vec; ++i) acc = vfmaq_f32(acc, qv[i], load4<kKey>(k, i));
      const float score = vaddvq_f32(acc) * scale;
      scores[j - first + s] = score;
      max_score = score > max_score ? score : max_score;
    }
    j += n;
  }
  float sum = std::exp(sink - max_score);  // 0 without a sink
  for (int64_t i = 0; i < n_pos - first; ++i) {
    scores[i] = std::exp(scores[i] - max_score);
    sum += scores[i];
  }
  if (row.lse != nullptr) row.lse[0] = max_score + std::log(sum);  // a piece: no sink
  const float inv_sum = 1.0f / sum;

  float32x4_t acc[kAttendNeonMaxHeadDim / 4];
  for (int64_t i = 0; i < n_vec; ++i) acc[i] = vdupq_n_f32(0.0f);
  for (int64_t j = first; j < n_pos;) {
    const uint8_t* values = kv.values(row.block_table[j / block_size], layer, kv_head);
    const int64_t slot = j % block_size;
    const int64_t n = n_pos - j < block_size - slot ? n_pos - j : block_size - slot;
    for (int64_t s = 0; s < n; ++s) {
      const float p = scores[j - first + s] * inv_sum;
      const uint8_t* v = values + static_cast<size_t>(slot + s) * value_row_bytes;
      for (int64_t i = 0; i < n_vec; ++i) acc[i] = vfmaq_n_f32(acc[i], load4<kValue>(v, i), p);
    }
    j += n;
  }
  for (int64_t i = 0; i < n_vec; ++i) vst1q_f32(out + 4 * i, acc[i]);
}

// The kernel for the layout's value type, keys of type kKey.
template <KvType kKey>
AttendHeadKernel for_values(KvType value) {
  switch (value) {
    case KvType::F16:
      return attend_head_typed<kKey, KvType::F16>;
    case KvType::F32:
      return attend_head_typed<kKey, KvType::F32>;
    case KvType::Q8_0:
      return attend_head_typed<kKey, KvType::Q8_0>;
    case KvType::Q4_0:
      return attend_head_typed<kKey, KvType::Q4_0>;
  }
  return nullptr;
}

}  // namespace

void attend_head(const KvStorage& kv, int64_t layer, int64_t kv_head, const AttentionRow& row,
                 const float* q, float* out, float* scores, float sink) {
  const KvTypes& types = kv.layout().types;
  AttendHeadKernel kernel = nullptr;
  switch (types.key) {
    case KvType::F16:
      kernel = for_values<KvType::F16>(types.value);
      break;
    case KvType::F32:
      kernel = for_values<KvType::F32>(types.value);
      break;
    case KvType::Q8_0:
      kernel = for_values<KvType::Q8_0>(types.value);
      break;
    case KvType::Q4_0:
      kernel = for_values<KvType::Q4_0>(types.value);
      break;
  }
  kernel(kv, layer, kv_head, row, q, out, scores, sink);
}

}  // namespace trellis::kernels_detail::neon
