#include "model/architecture.h"

#include <array>
#include <cassert>

namespace trellis {
namespace {

constexpr std::array<Architecture, 5> kArchitectures = {{
    // Llama 1-3, Mistral and every file that declares `llama`; Llama 3.x's rope scaling comes
    // as the rope_freqs tensor.
    {
        .name = "llama",
        .rope_style = RopeStyle::ADJACENT,
        .rope_factors = RopeFactors::FREQS,
    },
    {
        .name = "qwen2",
        .qkv_bias = true,
    },
    {
        .name = "qwen3",
        .qk_norm = true,
    },
    {
        .name = "gemma3",
        .qk_norm = true,
        .post_norms = true,
        .ffn_activation = FfnActivation::GELU_TANH,
        .scale_embeddings = true,
        .sliding_window = true,
        .default_swa_pattern = 6,
        .width_query_scale_layers = 62,
    },
    // Phi-3 / Phi-3.5 / Phi-4-mini; the 128k-context files scale RoPE with LongRoPE factors.
    {
        .name = "phi3",
        .fused_qkv = true,
        .fused_gate_up = true,
        .rope_factors = RopeFactors::LONGROPE,
    },
}};

}  // namespace

std::span<const Architecture> architectures() {
  return kArchitectures;
}

const Architecture* find_architecture(std::string_view name) {
  for (const Architecture& arch : kArchitectures) {
    if (arch.name == name) return &arch;
  }
  return nullptr;
}

size_t architecture_index(const Architecture& arch) {
  const std::span<const Architecture> rows = architectures();
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].name == arch.name) return i;
  }
  assert(false && "not a supported architecture");
  return 0;
}

std::string supported_architectures() {
  std::string names;
  for (const Architecture& arch : kArchitectures) {
    if (!names.empty()) names += ", ";
    names += arch.name;
  }
  return names;
}

}  // namespace trellis
