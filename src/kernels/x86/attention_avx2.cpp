#include "kernels/x86/attention_avx2.h"

// Compiled with AVX2: no std:: templates here (see avx2_util.h for why).

#include <immintrin.h>
#include <math.h>

namespace trellis::kernels_detail {
namespace {

constexpr int64_t kMaxHeadDim = kAttendAvx2MaxHeadDim;

// 8 keys or values at `p` as f32, from f16 or f32 storage.
inline __m256 load8(const uint8_t* p, bool f16) {
  if (f16) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
}

// Sum of the 8 lanes in a fixed order: (0+4, 1+5, 2+6, 3+7), then pairs, then the last two.
inline float horizontal_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

}  // namespace

void attend_head_avx2(const KvStorage& kv, int64_t layer, int64_t kv_head, const AttentionRow& row,
                      const float* q, float* out, float* scores, float sink) {
  const KvLayout& layout = kv.layout();
  const int64_t head_dim = layout.head_dim;
  const int64_t n_vec = head_dim / 8;
  const int32_t block_size = layout.block_size;
  const bool f16 = layout.type == KvType::F16;
  const size_t elem = layout.element_bytes();
  const size_t row_bytes = static_cast<size_t>(head_dim) * elem;
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
      const uint8_t* k = keys + static_cast<size_t>(slot + s) * row_bytes;
      __m256 acc = _mm256_mul_ps(qv[0], load8(k, f16));
      for (int64_t i = 1; i < n_vec; ++i)
        acc = _mm256_fmadd_ps(qv[i], load8(k + 8 * i * elem, f16), acc);
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
  const float inv_sum = 1.0f / sum;

  __m256 acc[kMaxHeadDim / 8];
  for (int64_t i = 0; i < n_vec; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t j = first; j < n_pos;) {
    const uint8_t* values = kv.values(row.block_table[j / block_size], layer, kv_head);
    const int64_t slot = j % block_size;
    const int64_t n = n_pos - j < block_size - slot ? n_pos - j : block_size - slot;
    for (int64_t s = 0; s < n; ++s) {
      const __m256 p = _mm256_set1_ps(scores[j - first + s] * inv_sum);
      const uint8_t* v = values + static_cast<size_t>(slot + s) * row_bytes;
      for (int64_t i = 0; i < n_vec; ++i)
        acc[i] = _mm256_fmadd_ps(p, load8(v + 8 * i * elem, f16), acc[i]);
    }
    j += n;
  }
  for (int64_t i = 0; i < n_vec; ++i) _mm256_storeu_ps(out + 8 * i, acc[i]);
}

}  // namespace trellis::kernels_detail
