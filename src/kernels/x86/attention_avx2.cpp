#include "kernels/x86/attention_avx2.h"

#include "kernels/matmul_internal.h"

// Compiled with AVX2: no std:: templates here (see avx2_util.h for why).

#include <immintrin.h>
#include <math.h>

namespace trellis::kernels_detail {
namespace {

constexpr int64_t kMaxHeadDim = kAttendAvx2MaxHeadDim;

// Elements [8i, 8i + 8) of a key or value row of type kType as f32: the values of
// kv_decode_row (a code times its block's scale is one f32 product here too).
template <KvType kType>
inline __m256 load8(const uint8_t* row, int64_t i) {
  if constexpr (kType == KvType::F16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 16 * i)));
  } else if constexpr (kType == KvType::F32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row + 32 * i));
  } else {
    // q8_0: 34-byte blocks (f16 scale, 32 codes); q4_0: 18-byte blocks (f16 scale, then 16 bytes
    // whose low nibbles are elements 0..15 and high nibbles 16..31, each code offset by 8).
    const int64_t part = i % 4;  // which 8 of the block's 32 elements
    const uint8_t* block = row + (kType == KvType::Q8_0 ? 34 : 18) * (i / 4);
    unsigned short h;
    __builtin_memcpy(&h, block, 2);
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(h));
    __m256i codes;
    if constexpr (kType == KvType::Q8_0) {
      codes = _mm256_cvtepi8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 2 + 8 * part)));
    } else {
      __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 2 + 8 * (part % 2)));
      if (part >= 2) bytes = _mm_srli_epi16(bytes, 4);
      bytes = _mm_and_si128(bytes, _mm_set1_epi8(0x0f));
      codes = _mm256_sub_epi32(_mm256_cvtepu8_epi32(bytes), _mm256_set1_epi32(8));
    }
    return _mm256_mul_ps(_mm256_cvtepi32_ps(codes), d);
  }
}

// Sum of the 8 lanes in a fixed order: (0+4, 1+5, 2+6, 3+7), then pairs, then the last two.
inline float horizontal_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

template <KvType kKey, KvType kValue>
void attend_head(const KvStorage& kv, int64_t layer, int64_t kv_head, const AttentionRow& row,
                 const float* q, float* out, float* scores, float sink) {
  const KvLayout& layout = kv.layout();
  const int64_t head_dim = layout.head_dim;
  const int64_t n_vec = head_dim / 8;
  const int32_t block_size = layout.block_size;
  // (kv_row_bytes, not KvLayout's inline members: see avx2_util.h on inline functions.)
  const size_t key_row_bytes = kv_row_bytes(kKey, head_dim);
  const size_t value_row_bytes = kv_row_bytes(kValue, head_dim);
  const int64_t first = row.first_position;
  const int64_t n_pos = static_cast<int64_t>(row.position) + 1;
  const float scale = 1.0f / sqrtf(static_cast<float>(head_dim));

  __m256 qv[kMaxHeadDim / 8];
  for (int64_t i = 0; i < n_vec; ++i) qv[i] = _mm256_loadu_ps(q + 8 * i);

  // Scores, block by block through the table: positions [j, j + n) lie in one block, from slot
  // j % block_size; scores[i] holds position first + i.
  float max_score = sink;
  for (int64_t j = first; j < n_pos;) {
    const uint8_t* keys = kv.keys(row.block_table[j / block_size], layer, kv_head);
    const int64_t slot = j % block_size;
    const int64_t n = n_pos - j < block_size - slot ? n_pos - j : block_size - slot;
    for (int64_t s = 0; s < n; ++s) {
      const uint8_t* k = keys + static_cast<size_t>(slot + s) * key_row_bytes;
      __m256 acc = _mm256_mul_ps(qv[0], load8<kKey>(k, 0));
      for (int64_t i = 1; i < n_vec; ++i) acc = _mm256_fmadd_ps(qv[i], load8<kKey>(k, i), acc);
      const float score = horizontal_sum(acc) * scale;
      scores[j - first + s] = score;
      max_score = score > max_score ? score : max_score;
    }
    j += n;
  }
  float sum = expf(sink - max_score);  // 0 without a sink
  for (int64_t i = 0; i < n_pos - first; ++i) {
    scores[i] = expf(scores[i] - max_score);
    sum += scores[i];
  }
  if (row.lse != nullptr) row.lse[0] = max_score + logf(sum);  // a piece: no sink
  const float inv_sum = 1.0f / sum;

  __m256 acc[kMaxHeadDim / 8];
  for (int64_t i = 0; i < n_vec; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t j = first; j < n_pos;) {
    const uint8_t* values = kv.values(row.block_table[j / block_size], layer, kv_head);
    const int64_t slot = j % block_size;
    const int64_t n = n_pos - j < block_size - slot ? n_pos - j : block_size - slot;
    for (int64_t s = 0; s < n; ++s) {
      const __m256 p = _mm256_set1_ps(scores[j - first + s] * inv_sum);
      const uint8_t* v = values + static_cast<size_t>(slot + s) * value_row_bytes;
      for (int64_t i = 0; i < n_vec; ++i) acc[i] = _mm256_fmadd_ps(p, load8<kValue>(v, i), acc[i]);
    }
    j += n;
  }
  for (int64_t i = 0; i < n_vec; ++i) _mm256_storeu_ps(out + 8 * i, acc[i]);
}

// The kernel for the layout's value type, keys of type kKey.
template <KvType kKey>
AttendHeadKernel for_values(KvType value) {
  switch (value) {
    case KvType::F16:
      return attend_head<kKey, KvType::F16>;
    case KvType::F32:
      return attend_head<kKey, KvType::F32>;
    case KvType::Q8_0:
      return attend_head<kKey, KvType::Q8_0>;
    case KvType::Q4_0:
      return attend_head<kKey, KvType::Q4_0>;
  }
  return nullptr;
}

}  // namespace

void attend_head_avx2(const KvStorage& kv, int64_t layer, int64_t kv_head, const AttentionRow& row,
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

}  // namespace trellis::kernels_detail
