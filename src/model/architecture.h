// The model families the forward pass runs, each described by one row that says which shared
// building blocks its layers use (llama.cpp's `general.architecture` names). The forward pass
// (model.h) switches on the row; the tensors a family's files hold (model/family_tensors.h) and
// its hyperparameter keys (model/family_keys.h) are derived from the same row, and both the loader
// and the synthesizer read them. Adding a family means adding a row here, and whatever new block
// it needs in the forward pass and in those two lists.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kernels/ops.h"

namespace trellis {

enum class FfnActivation {
  SILU,       // SwiGLU: down(silu(gate) * up)
  GELU_TANH,  // GeGLU with the tanh approximation: down(gelu_tanh(gate) * up)
};

// What the second sublayer of every layer is. Only DENSE exists yet; a mixture-of-experts kind
// (a router ffn_gate_inp, stacked ffn_{gate,up,down}_exps, optional shared experts) is the next
// one, and selects its own tensors and keys in family_tensors.cpp / family_keys.cpp.
enum class FfnKind {
  DENSE,  // one gated FFN: ffn_gate, ffn_up, ffn_down (or ffn_up holding both, fused_gate_up)
};

// Optional per-pair divisors of the RoPE frequencies a family's files may carry.
enum class RopeFactors {
  NONE,
  FREQS,     // rope_freqs.weight: one set (Llama 3's scaling)
  LONGROPE,  // rope_factors_short/long.weight, chosen by the context (Phi-3.5, Phi-4-mini)
};

// Whether a family's files must hold a tensor or key, or may.
enum class Presence { REQUIRED, OPTIONAL };

// One family. Rows are written with designated initializers; a field left out is the common
// choice (NEOX rope pairs, no extra block, a dense SwiGLU FFN).
struct Architecture {
  std::string_view name;  // general.architecture, also the prefix of its metadata keys
  RopeStyle rope_style = RopeStyle::NEOX;
  bool qkv_bias = false;    // attn_q/k/v.bias added after the projections (qwen2)
  bool fused_qkv = false;   // one attn_qkv matrix: q rows, then k rows, then v rows (phi3)
  bool qk_norm = false;     // per-head RMSNorm of q and k before RoPE (qwen3, gemma3)
  bool post_norms = false;  // RMSNorm of each sublayer's output before the residual add (gemma3)
  FfnKind ffn_kind = FfnKind::DENSE;
  bool fused_gate_up = false;  // ffn_up holds the gate rows, then the up rows; no ffn_gate (phi3)
  FfnActivation ffn_activation = FfnActivation::SILU;
  bool scale_embeddings = false;  // embeddings times sqrt(n_embd) before the first layer (gemma3)
  // Local layers attend to a window (attention.sliding_window); files without the pattern key
  // have `default_swa_pattern` (gemma3: five local layers, then a global one).
  bool sliding_window = false;
  int32_t default_swa_pattern = 1;
  RopeFactors rope_factors = RopeFactors::NONE;
  // A model of this many layers divides its attention scores by sqrt(n_embd / n_head) instead of
  // sqrt(head size): Gemma 3 27B's query_pre_attn_scalar, which its GGUF files do not carry
  // (llama.cpp recognizes the model by its 62 layers). 0: none.
  int64_t width_query_scale_layers = 0;
};

// Every supported family, in the order supported_architectures() names them.
std::span<const Architecture> architectures();
// The description of `name`, or null when the family is not supported.
const Architecture* find_architecture(std::string_view name);
// "llama, qwen2, qwen3, gemma3, phi3"
std::string supported_architectures();
// The position of `arch` (matched by name) in architectures(). Precondition: it is one of them.
size_t architecture_index(const Architecture& arch);

// A table derived from the families: build(a) for every row a of architectures(), in order (so
// entry architecture_index(arch) is arch's).
template <class Build>
auto build_per_architecture(Build build) {
  std::vector<std::invoke_result_t<Build, const Architecture&>> out;
  for (const Architecture& a : architectures()) out.push_back(build(a));
  return out;
}

}  // namespace trellis
