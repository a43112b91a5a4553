#include "model/synth_family.h"

#include <array>

namespace trellis {
namespace {

// From the published configs: Llama 2 (rope base 10^4, eps 10^-5, untied), Llama 3.2
// (5·10^5, tied), Qwen2.5 and Qwen3 (10^6, 10^-6, tied), Gemma 3 (10^6, 10^-6, tied),
// Phi-3 (10^4, 10^-5, untied); Qwen3-30B-A3B and Qwen1.5-MoE (10^6, 10^-6, untied), OLMoE
// (10^4, 10^-5, untied), Mixtral (10^6, 10^-5, untied), gpt-oss (150000, 10^-5, untied).
constexpr std::array<SynthFamily, 11> kFamilies = {{
    {.name = "llama", .architecture = "llama"},
    {.name = "llama3",
     .architecture = "llama",
     .rope_freq_base = 500000.0,
     .tied_output = true,
     .llama3_rope = true},
    {.name = "qwen2",
     .architecture = "qwen2",
     .rope_freq_base = 1e6,
     .rms_norm_eps = 1e-6,
     .tied_output = true},
    {.name = "qwen3",
     .architecture = "qwen3",
     .rope_freq_base = 1e6,
     .rms_norm_eps = 1e-6,
     .wide_heads = true,
     .tied_output = true},
    {.name = "gemma3",
     .architecture = "gemma3",
     .rope_freq_base = 1e6,
     .rms_norm_eps = 1e-6,
     .wide_heads = true,
     .tied_output = true},
    {.name = "phi3", .architecture = "phi3"},
    {.name = "qwen3moe",
     .architecture = "qwen3moe",
     .rope_freq_base = 1e6,
     .rms_norm_eps = 1e-6,
     .wide_heads = true,
     .recast_experts = 16,
     .recast_experts_used = 4},
    {.name = "qwen2moe",
     .architecture = "qwen2moe",
     .rope_freq_base = 1e6,
     .rms_norm_eps = 1e-6,
     .recast_experts = 8,
     .recast_experts_used = 2},
    {.name = "olmoe", .architecture = "olmoe", .recast_experts = 8, .recast_experts_used = 4},
    {.name = "mixtral",
     .architecture = "mixtral",
     .rope_freq_base = 1e6,
     .recast_experts = 8,
     .recast_experts_used = 2},
    {.name = "gpt-oss",
     .architecture = "gpt-oss",
     .rope_freq_base = 150000.0,
     .recast_experts = 16,
     .recast_experts_used = 4},
}};

}  // namespace

std::span<const SynthFamily> synth_families() {
  return kFamilies;
}

const SynthFamily* find_synth_family(std::string_view name) {
  for (const SynthFamily& family : kFamilies) {
    if (family.name == name) return &family;
  }
  return nullptr;
}

std::string synth_family_names() {
  std::string names;
  for (const SynthFamily& family : kFamilies) {
    if (!names.empty()) names += ", ";
    names += family.name;
  }
  return names;
}

}  // namespace trellis
