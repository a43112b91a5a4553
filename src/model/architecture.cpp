#include "model/architecture.h"

#include <array>
#include <cassert>

namespace trellis {
namespace {

constexpr std::array<Architecture, 10> kArchitectures = {{
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
        .qk_norm = QkNorm::PER_HEAD,
    },
    {
        .name = "gemma3",
        .qk_norm = QkNorm::PER_HEAD,
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
    // Qwen3-30B-A3B, Qwen3-Coder-30B-A3B, Qwen3-235B-A22B: qwen3's attention, 128 experts top-8.
    {
        .name = "qwen3moe",
        .qk_norm = QkNorm::PER_HEAD,
        .ffn_kind = FfnKind::MOE,
        .expert_weights_norm = true,
        .expert_ffn_key = true,
    },
    // Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B: qwen2's attention; routed experts plus a shared one.
    {
        .name = "qwen2moe",
        .qkv_bias = true,
        .ffn_kind = FfnKind::MOE,
        .expert_ffn_key = true,
        .shared_expert = true,
    },
    // OLMoE-1B-7B: q and k normed as whole vectors, 64 experts top-8, weights not renormalized.
    {
        .name = "olmoe",
        .qk_norm = QkNorm::WHOLE,
        .ffn_kind = FfnKind::MOE,
    },
    // Mixtral 8x7B / 8x22B: llama files with llama.expert_count, 8 experts top-2.
    {
        .name = "mixtral",
        .file_name = "llama",
        .rope_style = RopeStyle::ADJACENT,
        .ffn_kind = FfnKind::MOE,
        .expert_weights_norm = true,
    },
    // gpt-oss-20b / -120b: biased attention with sinks, local (window) and global layers
    // alternating, YaRN on both; 32 or 128 biased experts, top-4 by raw score, a softmax over
    // those four, the clamped SwiGLU.
    {
        .name = "gpt-oss",
        .qkv_bias = true,
        .output_bias = true,
        .attention_sinks = true,
        .ffn_norm_name = "post_attention_norm.weight",
        .ffn_kind = FfnKind::MOE,
        .expert_gating = ExpertGating::SOFTMAX_WEIGHT,
        .expert_ffn_key = true,
        .expert_biases = true,
        .ffn_activation = FfnActivation::SWIGLU_OAI,
        .sliding_window = true,
        .default_swa_pattern = 2,
        .local_rope_scaled = true,
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

std::string_view file_architecture(const Architecture& arch) {
  return arch.file_name.empty() ? arch.name : arch.file_name;
}

const Architecture* find_file_architecture(std::string_view file_arch, int64_t n_expert) {
  // A file name several families share (llama: dense, or Mixtral's experts) is told apart by
  // whether the file has experts; a name only one family has is that family's, experts or not
  // (its reader then refuses what does not fit).
  const Architecture* only = nullptr;
  int n_sharing = 0;
  for (const Architecture& arch : kArchitectures) {
    if (file_architecture(arch) != file_arch) continue;
    ++n_sharing;
    only = &arch;
  }
  if (n_sharing <= 1) return only;
  for (const Architecture& arch : kArchitectures) {
    if (file_architecture(arch) == file_arch && (arch.ffn_kind == FfnKind::MOE) == (n_expert > 0))
      return &arch;
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
    if (!arch.file_name.empty()) continue;  // its files say another family's name
    if (!names.empty()) names += ", ";
    names += arch.name;
  }
  return names;
}

}  // namespace trellis
