#include "kernels/ops.h"

#include <cmath>

namespace trellis {

void rms_norm_row(const float* x, const float* weight, int64_t n, float eps, float* out) {
  // Sum of squares in double, in index order: accurate and the same for every batch.
  double sum_sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void rope_row(float* x, int64_t n_heads, int64_t head_dim, int32_t position,
              const RopeParams& rope) {
  // The angles step by repeated multiplication, and the factors apply in llama.cpp's order, so
  // that outputs stay comparable with its reference logits. Each pair's angle is the same in
  // every head: one cos/sin per pair serves them all.
  const float theta_scale = std::pow(rope.freq_base, -2.0f / static_cast<float>(rope.n_rot));
  // Pair i is (head[i * first_step], head[i * first_step + partner]).
  const int64_t n_pairs = rope.n_rot / 2;
  const int64_t first_step = rope.style == RopeStyle::ADJACENT ? 2 : 1;
  const int64_t partner = rope.style == RopeStyle::ADJACENT ? 1 : n_pairs;
  float theta_base = static_cast<float>(position);
  for (int64_t i = 0; i < n_pairs; ++i) {
    const float factor = rope.freq_factors != nullptr ? rope.freq_factors[i] : 1.0f;
    const float theta = rope.freq_scale * (theta_base / factor);
    const float cos_t = std::cos(theta) * rope.attn_factor;
    const float sin_t = std::sin(theta) * rope.attn_factor;
    for (int64_t h = 0; h < n_heads; ++h) {
      float* first = x + h * head_dim + i * first_step;
      const float a = first[0];
      const float b = first[partner];
      first[0] = a * cos_t - b * sin_t;
      first[partner] = a * sin_t + b * cos_t;
    }
    theta_base *= theta_scale;
  }
}

void silu_mul_row(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void gelu_tanh_mul_row(float* gate, const float* up, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = 0; i < n; ++i) {
    const float z = gate[i];
    const float u = kSqrt2OverPi * (z + 0.044715f * z * z * z);
    gate[i] = z / (1.0f + std::exp(-2.0f * u)) * up[i];
  }
}

void add_row(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace trellis
