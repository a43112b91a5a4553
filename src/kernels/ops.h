// Element-wise and per-row operations of the forward pass. Each row's result depends only on that
// row (fixed reduction order), so these are batch-invariant by construction.
#pragma once

#include <cstdint>
#include <span>

namespace trellis {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i], for one row of n values (out may alias x).
void rms_norm_row(const float* x, const float* weight, int64_t n, float eps, float* out);

// LayerNorm (BERT's): out[i] = (x[i] - mean(x)) / sqrt(var(x) + eps) * weight[i] + bias[i], for one
// row of n values (out may alias x); mean and variance in double, in a fixed order.
void layer_norm_row(const float* x, const float* weight, const float* bias, int64_t n, float eps,
                    float* out);

// Which elements of a head RoPE rotates together (llama.cpp's rope types "normal" and "neox").
enum class RopeStyle {
  ADJACENT,  // pairs (x[2i], x[2i + 1]): Llama and the GGUF llama convention
  NEOX,      // pairs (x[i], x[i + n_rot / 2]): the first half against the second (Qwen2, Gemma)
};

// How RoPE turns the heads of a row.
struct RopeParams {
  int64_t n_rot = 0;  // rotated elements per head: even, at most the head size
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;  // 1 / the linear scaling factor
  RopeStyle style = RopeStyle::ADJACENT;
  // [n_rot / 2] divisors of each pair's frequency (Llama 3's rope_freqs, Phi-3's LongRoPE
  // factors); null: all 1.
  const float* freq_factors = nullptr;
  float attn_factor = 1.0f;  // multiplies cos and sin (LongRoPE's magnitude correction)
  // YaRN: pairs below corr_low keep the unscaled angle, pairs above corr_high the scaled one,
  // those between a linear mix; cos and sin are further multiplied by 1 + 0.1 ln(1 / freq_scale).
  bool yarn = false;
  float corr_low = 0.0f;
  float corr_high = 0.0f;
};

// YaRN's range of pairs [low, high] between which the angle moves from the unscaled to the
// scaled one, for a model trained on n_ctx_orig tokens (beta_fast 32, beta_slow 1: the pairs
// turning more than 32 times over the original context keep their angle, those turning less than
// once are scaled): the pair where a dimension turns r times is n_rot ln(n_ctx_orig / (2 pi r)) /
// (2 ln base), low rounded down, high up, within [0, n_rot - 1].
void yarn_corr_dims(int64_t n_rot, int64_t n_ctx_orig, float base, float* low, float* high);

// Rotary position embedding, applied in place to n_heads heads of head_dim values. Pair i
// (0 <= i < n_rot / 2; its elements chosen by `style`) is rotated by the angle
//   theta_i = freq_scale * (position * freq_base^(-2i / n_rot) / freq_factors[i])
// (with YaRN: mixed with the unscaled angle as RopeParams says) and scaled by attn_factor (m):
// (a, b) -> m (a cos theta_i - b sin theta_i, a sin theta_i + b cos theta_i). Elements at n_rot
// and beyond are left as they are.
void rope_row(float* x, int64_t n_heads, int64_t head_dim, int32_t position,
              const RopeParams& rope);

// gate[i] = silu(gate[i]) * up[i]  (SwiGLU), silu(z) = z / (1 + e^-z).
void silu_mul_row(float* gate, const float* up, int64_t n);

// gate[i] = gelu_tanh(gate[i]) * up[i]  (GeGLU, as Gemma uses it), with the tanh approximation
//   gelu_tanh(z) = 0.5 z (1 + tanh(sqrt(2 / pi) (z + 0.044715 z^3)))
// computed as z / (1 + e^(-2u)), u = sqrt(2 / pi) (z + 0.044715 z^3): the same function, without
// the cancellation in 1 + tanh(u) for negative z, and exact limits (z for large z, -0 for large
// negative z).
void gelu_tanh_mul_row(float* gate, const float* up, int64_t n);

// x[i] = gelu_tanh(x[i]) (BERT's feed-forward activation, as llama.cpp computes it: the tanh
// approximation above).
void gelu_tanh_row(float* x, int64_t n);

// gpt-oss's clamped SwiGLU: with g = min(gate[i], 7) and u = clamp(up[i], -7, 7),
//   gate[i] = g * sigmoid(1.702 g) * (u + 1)
void swiglu_oai_row(float* gate, const float* up, int64_t n);

// x[i] += y[i]
void add_row(float* x, const float* y, int64_t n);

// Adds `bias` to each of n_rows rows of bias.size() values (nothing when it is empty).
void add_bias_rows(float* rows, std::span<const float> bias, int64_t n_rows);

}  // namespace trellis
