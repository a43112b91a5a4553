#include "kernels/ops.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <numbers>

// The activation loops are compiled for AVX-512, AVX2 and the baseline, picked at load time: the
// vector widths differ, the arithmetic does not (every operation is a correctly rounded IEEE one,
// without fused multiply-adds), so all three give the same bits. Not under ThreadSanitizer, whose
// instrumented load-time resolver crashes before its runtime starts (the baseline loop then runs).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define TRELLIS_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TRELLIS_VECTOR_CLONES
#endif

namespace trellis {

namespace {

// Sum of x[i] (squares: of x[i] - shift) in double, in eight interleaved partial sums (element i
// into sum i % 8, which the compiler keeps in vector lanes) added up in a fixed tree: the same
// order for every batch and every variant.
template <bool kSquares>
inline double sum_eightfold(const float* x, int64_t n, double shift) {
  double partial[8] = {};
  auto term = [shift](float v) {
    const double d = static_cast<double>(v) - shift;
    return kSquares ? d * d : d;
  };
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) partial[j] += term(x[i + j]);
  }
  for (int j = 0; i < n; ++i, ++j) partial[j] += term(x[i]);
  return ((partial[0] + partial[4]) + (partial[2] + partial[6])) +
         ((partial[1] + partial[5]) + (partial[3] + partial[7]));
}

}  // namespace

TRELLIS_VECTOR_CLONES void rms_norm_row(const float* x, const float* weight, int64_t n, float eps,
                                        float* out) {
  const double sum_sq = sum_eightfold<true>(x, n, 0.0);
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
  const float yarn_mscale =
      rope.yarn ? rope.attn_factor * (1.0f + 0.1f * std::log(1.0f / rope.freq_scale))
                : rope.attn_factor;
  for (int64_t i = 0; i < n_pairs; ++i) {
    const float factor = rope.freq_factors != nullptr ? rope.freq_factors[i] : 1.0f;
    const float unscaled = theta_base / factor;
    float theta = rope.freq_scale * unscaled;
    if (rope.yarn) {
      // The share of the unscaled angle: 1 below corr_low, 0 above corr_high, linear between.
      const float t = (static_cast<float>(i) - rope.corr_low) /
                      std::max(0.001f, rope.corr_high - rope.corr_low);
      const float keep = 1.0f - std::min(1.0f, std::max(0.0f, t));
      theta = theta * (1.0f - keep) + unscaled * keep;
    }
    const float cos_t = std::cos(theta) * yarn_mscale;
    const float sin_t = std::sin(theta) * yarn_mscale;
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

void yarn_corr_dims(int64_t n_rot, int64_t n_ctx_orig, float base, float* low, float* high) {
  auto corr_dim = [&](float turns) {
    return static_cast<float>(n_rot) *
           std::log(static_cast<float>(n_ctx_orig) / (turns * 2.0f * std::numbers::pi_v<float>)) /
           (2.0f * std::log(base));
  };
  *low = std::max(0.0f, std::floor(corr_dim(32.0f)));
  *high = std::min(static_cast<float>(n_rot - 1), std::ceil(corr_dim(1.0f)));
}

TRELLIS_VECTOR_CLONES void layer_norm_row(const float* x, const float* weight, const float* bias,
                                          int64_t n, float eps, float* out) {
  const double mean = sum_eightfold<false>(x, n, 0.0) / static_cast<double>(n);
  const double var = sum_eightfold<true>(x, n, mean) / static_cast<double>(n);
  const auto mean_f = static_cast<float>(mean);
  const float scale = static_cast<float>(1.0 / std::sqrt(var + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] - mean_f) * scale * weight[i] + bias[i];
}

namespace {

// 2^k for -126 <= k <= 127, from its bits.
inline float power_of_two(int32_t k) {
  return std::bit_cast<float>(static_cast<uint32_t>(k + 127) << 23);
}

// e^x for every f32 x (inf above ~88.72, 0 below ~-103), within 2 ulp of the true value where
// the result is normal. Written with plain multiplies and adds (no libm call, no fused
// multiply-add: the library builds with -ffp-contract=off) so that the compiler vectorizes the
// loops that call it and every variant of this code rounds the same way: an element's result
// does not depend on where the vectorized part of a loop ends.
//   x = n ln2 + r, |r| <= ln2 / 2 (n rounded to nearest by the 1.5 * 2^23 trick; ln2 in two parts
//   so that n ln2 is exact), e^r by the degree-6 minimax polynomial of Cephes' expf, then times
//   2^n as two normal powers of two (n splits into halves), which overflows to inf and
//   underflows to 0 where e^x does.
inline float exp_poly(float x) {
  x = x < -104.0f ? -104.0f : x;                 // e^-104 is 0 in f32, and keeps n in range
  x = x > 89.0f ? 89.0f : x;                     // e^89 overflows f32
  constexpr float kRoundingShift = 12582912.0f;  // 1.5 * 2^23
  const float n = (x * 1.44269504088896341f + kRoundingShift) - kRoundingShift;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + (r + 1.0f);
  const auto n_int = static_cast<int32_t>(n);
  const int32_t half = n_int / 2;
  return p * power_of_two(half) * power_of_two(n_int - half);
}

// gelu_tanh(z) as z / (1 + e^(-2u)), u = sqrt(2 / pi) (z + 0.044715 z^3) (see ops.h).
inline float gelu_tanh(float z) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  const float u = kSqrt2OverPi * (z + 0.044715f * z * z * z);
  return z / (1.0f + exp_poly(-2.0f * u));
}

}  // namespace

TRELLIS_VECTOR_CLONES void silu_mul_row(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + exp_poly(-g)) * up[i];
  }
}

TRELLIS_VECTOR_CLONES void gelu_tanh_mul_row(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) gate[i] = gelu_tanh(gate[i]) * up[i];
}

TRELLIS_VECTOR_CLONES void gelu_tanh_row(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = gelu_tanh(x[i]);
}

TRELLIS_VECTOR_CLONES void swiglu_oai_row(float* gate, const float* up, int64_t n) {
  constexpr float kAlpha = 1.702f;
  constexpr float kLimit = 7.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], kLimit);
    const float u = std::clamp(up[i], -kLimit, kLimit);
    gate[i] = g / (1.0f + exp_poly(-kAlpha * g)) * (u + 1.0f);
  }
}

void add_row(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void add_bias_rows(float* rows, std::span<const float> bias, int64_t n_rows) {
  const auto n = static_cast<int64_t>(bias.size());
  for (int64_t r = 0; r < n_rows; ++r) add_row(rows + r * n, bias.data(), n);
}

}  // namespace trellis
