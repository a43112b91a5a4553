// Hyperparameters of a model, read from GGUF metadata: `general.architecture` names the family
// (model/architecture.h) and the prefix of every other key (`llama.*`, `qwen2.*`, ...).
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"

namespace trellis {

class GgufFile;

// How router scores become the weights of a token's chosen experts (fixed per family).
enum class ExpertGating {
  SOFTMAX,  // softmax over every expert, then the chosen ones' probabilities (renormalized or not)
  // the k best raw scores chosen, then a softmax over those k only (gpt-oss)
  SOFTMAX_WEIGHT,
};

// The most experts a mixture-of-experts file may declare (llama.cpp's bound too).
inline constexpr int64_t kMaxExperts = 512;

struct ModelHParams {
  // The family (Architecture::name): general.architecture, except for a family whose files say
  // another's name (mixtral: a llama file with experts).
  std::string arch = "llama";
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;  // ARCH.context_length
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t n_ff = 0;
  // attention.key_length (= value_length): the head size, which may differ from n_embd / n_head
  // (qwen3, gemma3); 0 means n_embd / n_head.
  int64_t n_embd_head = 0;
  int64_t n_rot = 0;  // rope.dimension_count; defaults to the head size
  double rope_freq_base = 10000.0;
  double rope_freq_scale = 1.0;  // 1 / the rope scaling factor (linear or YaRN)
  // YaRN (rope.scaling.type yarn): the scaling mixes with the unscaled angles by frequency, over
  // the original context n_ctx_orig (kernels/ops.h RopeParams).
  bool rope_yarn = false;
  // LongRoPE (Phi-3.5, Phi-4-mini): rope.scaling.attn_factor multiplies cos and sin, and the
  // rope_factors_long tensor replaces rope_factors_short when a sequence may grow beyond
  // rope.scaling.original_context_length (defaults: 1 and the training context).
  double rope_attn_factor = 1.0;
  int64_t n_ctx_orig = 0;
  double rms_norm_eps = 1e-5;
  // Sliding-window attention (architectures that have it): layer il is local when
  // il % swa_pattern < swa_pattern - 1; a local layer's query at position p sees positions
  // (p - n_swa, p], with its own rope base, and no rope scaling unless the family scales local
  // layers too (Architecture::local_rope_scaled). n_swa 0: every layer is global.
  int32_t n_swa = 0;
  int32_t swa_pattern = 1;
  double rope_freq_base_swa = 10000.0;
  // The attention scores are q.k / sqrt(query_scale_dim): the head size, except in the one model
  // of a family that divides by n_embd / n_head without saying so in its keys (Gemma 3 27B, see
  // Architecture::width_query_scale_layers). 0: the head size.
  int64_t query_scale_dim = 0;
  // Mixture of experts (FfnKind::MOE families; 0 elsewhere): expert_count experts of n_ff_exp
  // (expert_feed_forward_length, or n_ff where the family has no such key), expert_used_count of
  // them per token, their weights renormalized to sum 1 when the family does so
  // (Architecture::expert_weights_norm). n_ff_shexp: the shared expert's FFN length (qwen2moe).
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;
  int64_t n_ff_shexp = 0;
  bool expert_weights_norm = false;
  ExpertGating expert_gating = ExpertGating::SOFTMAX;

  int64_t head_dim() const { return n_embd_head > 0 ? n_embd_head : n_embd / n_head; }
  int64_t n_embd_q() const { return head_dim() * n_head; }
  int64_t n_embd_kv() const { return head_dim() * n_head_kv; }
  bool is_local_layer(int64_t il) const { return n_swa > 0 && il % swa_pattern < swa_pattern - 1; }
};

// Reads and validates the hyperparameters (a supported architecture, positive sizes, heads
// dividing the width, GQA ratio, rope and window settings). The vocab size comes from
// ARCH.vocab_size or the tokenizer's token list.
Result<ModelHParams> read_model_hparams(const GgufFile& file);

}  // namespace trellis
