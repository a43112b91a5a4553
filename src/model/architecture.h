// The model families the forward pass runs, each described by which shared building blocks its
// layers use (llama.cpp's `general.architecture` names). One forward pass (model.h) reads these
// descriptions; adding a family means adding a row here, its tensors in model.cpp's loader, and
// whatever new block it needs in the forward pass.
#pragma once

#include <string>
#include <string_view>

#include "kernels/ops.h"

namespace trellis {

enum class FfnActivation {
  SILU,       // SwiGLU: down(silu(gate) * up)
  GELU_TANH,  // GeGLU with the tanh approximation: down(gelu_tanh(gate) * up)
};

// Optional per-pair divisors of the RoPE frequencies a family's files may carry.
enum class RopeFactors {
  NONE,
  FREQS,     // rope_freqs.weight: one set (Llama 3's scaling)
  LONGROPE,  // rope_factors_short/long.weight, chosen by the context (Phi-3.5, Phi-4-mini)
};

struct Architecture {
  std::string_view name;  // general.architecture, also the prefix of its metadata keys
  RopeStyle rope_style;
  bool qkv_bias;       // attn_q/k/v.bias added after the projections (qwen2)
  bool fused_qkv;      // one attn_qkv matrix: q rows, then k rows, then v rows (phi3)
  bool qk_norm;        // per-head RMSNorm of q and k before RoPE (qwen3, gemma3)
  bool post_norms;     // RMSNorm of each sublayer's output before the residual add (gemma3)
  bool fused_gate_up;  // ffn_up holds the gate rows, then the up rows; no ffn_gate (phi3)
  FfnActivation ffn_activation;
  bool scale_embeddings;  // embeddings multiplied by sqrt(n_embd) before the first layer (gemma3)
  bool sliding_window;    // local layers attend to a window (attention.sliding_window) (gemma3)
  RopeFactors rope_factors;
};

// The description of `name`, or null when the family is not supported.
const Architecture* find_architecture(std::string_view name);
// "llama, qwen2, qwen3, gemma3, phi3"
std::string supported_architectures();

}  // namespace trellis
