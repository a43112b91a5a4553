// Element-wise and per-row operations of the forward pass. Each row's result depends only on that
// row (fixed reduction order), so these are batch-invariant by construction.
#pragma once

#include <cstdint>

namespace trellis {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i], for one row of n values (out may alias x).
void rms_norm_row(const float* x, const float* weight, int64_t n, float eps, float* out);

// Rotary position embedding, GGUF llama convention ("normal" rope): within each head, the adjacent
// pairs (x[2i], x[2i+1]) for 2i < n_rot are rotated by the angle
// position * freq_scale * freq_base^(-2i / n_rot). Applied in place to n_heads heads of head_dim.
void rope_row(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int32_t position,
              float freq_base, float freq_scale);

// gate[i] = silu(gate[i]) * up[i]  (SwiGLU), silu(z) = z / (1 + e^-z).
void silu_mul_row(float* gate, const float* up, int64_t n);

// x[i] += y[i]
void add_row(float* x, const float* y, int64_t n);

}  // namespace trellis
