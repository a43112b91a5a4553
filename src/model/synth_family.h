// The families `model synth --arch` writes, with the values their real models have that a
// preset's shapes do not say (rope base, norm epsilon, head size, tied output). Each names its
// architecture row (model/architecture.h); `llama3` is a llama file as Llama 3.x has it.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace trellis {

struct SynthFamily {
  std::string_view name;          // what --arch accepts
  std::string_view architecture;  // its Architecture::name
  double rope_freq_base = 10000.0;
  double rms_norm_eps = 1e-5;
  bool wide_heads = false;   // head size twice n_embd / n_head, so key_length is written
  bool tied_output = false;  // no output.weight: the logits reuse token_embd.weight
  bool llama3_rope = false;  // rope_freqs.weight with Llama 3.2's scaling
  // Mixtures of experts: the experts a preset recast to the family gets (of n_ff / used length
  // each; a shared expert, where the family has one, of n_ff).
  int64_t recast_experts = 0;
  int64_t recast_experts_used = 0;
};

// llama, llama3, qwen2, qwen3, gemma3, phi3, then the mixtures of experts.
std::span<const SynthFamily> synth_families();
// The family named `name`, or null.
const SynthFamily* find_synth_family(std::string_view name);
// "llama, llama3, qwen2, qwen3, gemma3, phi3, qwen3moe, qwen2moe, olmoe, mixtral, gpt-oss"
std::string synth_family_names();

}  // namespace trellis
