#include "model/architecture.h"

#include <array>

namespace trellis {
namespace {

// Fields: name, rope style, qkv bias, fused qkv, q/k norm, post norms, fused gate/up, activation,
// scaled embeddings, sliding window, rope frequency factors.
constexpr RopeFactors kNone = RopeFactors::NONE;
constexpr std::array<Architecture, 5> kArchitectures = {{
    // Llama 1-3, Mistral and every file that declares `llama`; Llama 3.x's rope scaling comes
    // as the rope_freqs tensor.
    {"llama", RopeStyle::ADJACENT, false, false, false, false, false, FfnActivation::SILU, false,
     false, RopeFactors::FREQS},
    {"qwen2", RopeStyle::NEOX, true, false, false, false, false, FfnActivation::SILU, false, false,
     kNone},
    {"qwen3", RopeStyle::NEOX, false, false, true, false, false, FfnActivation::SILU, false, false,
     kNone},
    {"gemma3", RopeStyle::NEOX, false, false, true, true, false, FfnActivation::GELU_TANH, true,
     true, kNone},
    // Phi-3 / Phi-3.5 / Phi-4-mini; the 128k-context files scale RoPE with LongRoPE factors.
    {"phi3", RopeStyle::NEOX, false, true, false, false, true, FfnActivation::SILU, false, false,
     RopeFactors::LONGROPE},
}};

}  // namespace

const Architecture* find_architecture(std::string_view name) {
  for (const Architecture& arch : kArchitectures) {
    if (arch.name == name) return &arch;
  }
  return nullptr;
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
