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
#include "model/model_hparams.h"

namespace trellis {

enum class FfnActivation {
  SILU,       // SwiGLU: down(silu(gate) * up)
  GELU_TANH,  // GeGLU with the tanh approximation: down(gelu_tanh(gate) * up)
  // gpt-oss's clamped SwiGLU: g = min(gate, 7), u = clamp(up, -7, 7),
  // down(g * sigmoid(1.702 g) * (u + 1))
  SWIGLU_OAI,
};

// What the second sublayer of every layer is; each kind selects its own tensors and keys in
// family_tensors.cpp / family_keys.cpp.
enum class FfnKind {
  DENSE,  // one gated FFN: ffn_gate, ffn_up, ffn_down (or ffn_up holding both, fused_gate_up)
  // A mixture of experts: a router (ffn_gate_inp) scores expert_count gated FFNs stored stacked
  // (ffn_{gate,up,down}_exps); each token runs the expert_used_count best and sums their outputs
  // weighted by their router probabilities (model/moe_ffn.h).
  MOE,
};

// Per-head RMSNorm of q and k (one weight of the head size shared by the heads), or of the whole
// q and k vectors (OLMoE: weights of n_head * head size and n_head_kv * head size).
enum class QkNorm { NONE, PER_HEAD, WHOLE };

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
  std::string_view name;  // the family's own name: general.architecture unless file_name is set
  // general.architecture (also the prefix of the metadata keys) when a family shares another's
  // name: Mixtral files say `llama` and are told apart by llama.expert_count.
  std::string_view file_name = {};
  RopeStyle rope_style = RopeStyle::NEOX;
  bool qkv_bias = false;     // attn_q/k/v.bias added after the projections (qwen2)
  bool output_bias = false;  // attn_output.bias added after the output projection (gpt-oss)
  // attn_sinks.weight: one logit per query head that joins the softmax's denominator only, so a
  // head may attend to nothing (gpt-oss)
  bool attention_sinks = false;
  bool fused_qkv = false;         // one attn_qkv matrix: q rows, then k rows, then v rows (phi3)
  QkNorm qk_norm = QkNorm::NONE;  // RMSNorm of q and k before RoPE (qwen3, gemma3, olmoe)
  bool post_norms = false;  // RMSNorm of each sublayer's output before the residual add (gemma3)
  // The name of the FFN's input norm: gpt-oss's files call it post_attention_norm.
  std::string_view ffn_norm_name = "ffn_norm.weight";
  FfnKind ffn_kind = FfnKind::DENSE;
  // MOE: the gating; whether the chosen experts' weights are renormalized to sum to 1 (fixed per
  // family, as llama.cpp does); whether the experts' FFN length is expert_feed_forward_length
  // (else feed_forward_length); a shared expert every token runs, with a sigmoid gate (qwen2moe).
  ExpertGating expert_gating = ExpertGating::SOFTMAX;
  bool expert_weights_norm = false;
  bool expert_ffn_key = false;
  bool shared_expert = false;
  // Biases of the router (ffn_gate_inp.bias, added to the scores) and of every expert's gate, up
  // and down projections (ffn_{gate,up,down}_exps.bias; down's is added before the routing
  // weight multiplies the expert's output) (gpt-oss).
  bool expert_biases = false;
  bool fused_gate_up = false;  // ffn_up holds the gate rows, then the up rows; no ffn_gate (phi3)
  FfnActivation ffn_activation = FfnActivation::SILU;
  bool scale_embeddings = false;  // embeddings times sqrt(n_embd) before the first layer (gemma3)
  // Local layers attend to a window (attention.sliding_window); files without the pattern key
  // have `default_swa_pattern` (gemma3: five local layers, then a global one).
  bool sliding_window = false;
  int32_t default_swa_pattern = 1;
  // Local layers rotate as the global ones do: the same base unless rope.freq_base_swa says
  // otherwise, and the same scaling, YaRN included (gpt-oss). Otherwise local layers have their
  // own base (default 10000) and no scaling (gemma3).
  bool local_rope_scaled = false;
  RopeFactors rope_factors = RopeFactors::NONE;
  // A model of this many layers divides its attention scores by sqrt(n_embd / n_head) instead of
  // sqrt(head size): Gemma 3 27B's query_pre_attn_scalar, which its GGUF files do not carry
  // (llama.cpp recognizes the model by its 62 layers). 0: none.
  int64_t width_query_scale_layers = 0;
};

// Every supported family, in the order supported_architectures() names them.
std::span<const Architecture> architectures();
// The description of the family named `name` (Architecture::name), or null when it is not one.
const Architecture* find_architecture(std::string_view name);
// The family of a file whose general.architecture is `file_arch` and whose ARCH.expert_count is
// `n_expert` (0 when absent), or null when no family reads such files.
const Architecture* find_file_architecture(std::string_view file_arch, int64_t n_expert);
// general.architecture of the family's files, also the prefix of their metadata keys.
std::string_view file_architecture(const Architecture& arch);
// "llama, qwen2, qwen3, gemma3, phi3, ..." (the general.architecture names, each once)
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
