#include "model/encoder_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace trellis {
namespace {

// Query rows per product: the scores of a chunk stay in cache.
constexpr int64_t kQueryChunk = 64;

// Row i of `scores` (n values, already scaled) into its softmax weights.
void softmax_row(float* scores, int64_t n) {
  const float max_score = *std::max_element(scores, scores + n);
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    sum += scores[j];
  }
  for (int64_t j = 0; j < n; ++j) scores[j] = scores[j] / sum;
}

}  // namespace

EncoderAttentionScratch::EncoderAttentionScratch(int64_t max_len, int64_t head_dim)
    : keys(static_cast<size_t>(max_len * head_dim)),
      values(static_cast<size_t>(max_len * head_dim)),
      queries(static_cast<size_t>(kQueryChunk * head_dim)),
      scores(static_cast<size_t>(kQueryChunk * max_len)),
      out(static_cast<size_t>(kQueryChunk * head_dim)) {}

void encoder_attend_head(const EncoderAttentionInput& in, int32_t begin, int32_t end, int64_t h,
                         EncoderAttentionScratch& s) {
  const int64_t len = end - begin;
  const int64_t hd = in.head_dim;
  const size_t head_bytes = static_cast<size_t>(hd) * sizeof(float);
  const int64_t offset = h * hd;
  auto at = [&](auto* rows, int64_t r) { return rows + r * in.n_embd + offset; };
  for (int64_t j = 0; j < len; ++j) {
    std::memcpy(s.keys.data() + j * hd, at(in.k, begin + j), head_bytes);
    const float* v = at(in.v, begin + j);
    for (int64_t d = 0; d < hd; ++d) s.values[d * len + j] = v[d];
  }
  const WeightView keys{DType::F32, s.keys.data(), hd, len};
  const WeightView values{DType::F32, s.values.data(), len, hd};
  for (int64_t q0 = 0; q0 < len; q0 += kQueryChunk) {
    const int64_t n = std::min(kQueryChunk, len - q0);
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(s.queries.data() + i * hd, at(in.q, begin + q0 + i), head_bytes);
    matmul(keys, s.queries.data(), n, s.scores.data(), s.pool, s.matmul);
    for (int64_t i = 0; i < n; ++i) {
      float* row = s.scores.data() + i * len;
      for (int64_t j = 0; j < len; ++j) row[j] = row[j] * in.scale;
      softmax_row(row, len);
    }
    matmul(values, s.scores.data(), n, s.out.data(), s.pool, s.matmul);
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(at(in.out, begin + q0 + i), s.out.data() + i * hd, head_bytes);
  }
}

}  // namespace trellis
