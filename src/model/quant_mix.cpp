#include "model/quant_mix.h"

#include <cctype>
#include <charconv>
#include <string>

namespace trellis {
namespace {

bool use_more_bits(int64_t layer, int64_t n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

// N of a name "blk.N.*"; nullopt outside the layers.
std::optional<int64_t> layer_of(std::string_view name) {
  constexpr std::string_view kPrefix = "blk.";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  int64_t layer = 0;
  const char* begin = name.data() + kPrefix.size();
  const auto [end, error] = std::from_chars(begin, name.data() + name.size(), layer);
  if (error != std::errc() || end == begin) return std::nullopt;
  return layer;
}

// The type llama.cpp uses instead when rows cannot hold 256-value K blocks; F16 when they cannot
// hold that one's 32-value blocks either.
DType fallback(DType type, int64_t row_length) {
  if (row_length % 256 == 0 && type != DType::Q4_0 && type != DType::Q8_0) return type;
  if (row_length % 32 != 0) return DType::F16;
  switch (type) {
    case DType::Q3_K:
      return DType::Q4_0;
    case DType::Q4_K:
      return DType::Q5_0;
    case DType::Q5_K:
      return DType::Q5_1;
    case DType::Q4_0:
    case DType::Q4_1:  // blocks of 32: these stay
      return type;
    default:
      return DType::Q8_0;
  }
}

}  // namespace

std::optional<QuantMix> parse_quant_mix(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "q4_0") return QuantMix::Q4_0;
  if (lower == "q8_0") return QuantMix::Q8_0;
  if (lower == "q6_k") return QuantMix::Q6_K;
  if (lower == "q3_k_m") return QuantMix::Q3_K_M;
  if (lower == "q4_k_m") return QuantMix::Q4_K_M;
  if (lower == "q5_k_m") return QuantMix::Q5_K_M;
  if (lower == "mxfp4_moe") return QuantMix::MXFP4_MOE;
  return std::nullopt;
}

DType quant_mix_base(QuantMix mix) {
  switch (mix) {
    case QuantMix::Q4_0:
      return DType::Q4_0;
    case QuantMix::Q8_0:
      return DType::Q8_0;
    case QuantMix::Q6_K:
      return DType::Q6_K;
    case QuantMix::Q3_K_M:
      return DType::Q3_K;
    case QuantMix::Q4_K_M:
      return DType::Q4_K;
    case QuantMix::Q5_K_M:
      return DType::Q5_K;
    case QuantMix::MXFP4_MOE:
      return DType::MXFP4;
  }
  return DType::Q4_K;
}

uint32_t quant_mix_file_type(QuantMix mix) {
  switch (mix) {
    case QuantMix::Q4_0:
      return 2;
    case QuantMix::Q8_0:
      return 7;
    case QuantMix::Q6_K:
      return 18;
    case QuantMix::Q3_K_M:
      return 12;
    case QuantMix::Q4_K_M:
      return 15;
    case QuantMix::Q5_K_M:
      return 17;
    case QuantMix::MXFP4_MOE:
      return 38;
  }
  return 15;
}

bool quant_mix_quantizes(std::string_view name, int n_dims) {
  return n_dims >= 2 && name.ends_with("weight") && !name.ends_with("_norm.weight") &&
         name.find("ffn_gate_inp.weight") == std::string_view::npos &&
         name != "position_embd.weight" && name != "token_types.weight";
}

DType quant_mix_type(QuantMix mix, std::string_view name, int64_t row_length, int64_t n_layer,
                     bool tied_output, bool with_importance) {
  if (mix == QuantMix::MXFP4_MOE) {  // blocks of 32 for both; other rows stay f16
    const bool expert = name.find("_exps.") != std::string_view::npos;
    if (row_length % 32 != 0) return DType::F16;
    return expert ? DType::MXFP4 : DType::Q8_0;
  }
  DType type = quant_mix_base(mix);
  const bool is_output = name == "output.weight" || (tied_output && name == "token_embd.weight");
  const std::optional<int64_t> layer = layer_of(name);
  const bool values = name.ends_with(".attn_v.weight") || name.ends_with(".attn_qkv.weight");
  // ffn_down covers the experts' (ffn_down_exps) and a shared expert's (ffn_down_shexp) too.
  const bool down = name.find(".ffn_down") != std::string_view::npos;
  switch (mix) {
    case QuantMix::Q8_0:
      break;
    case QuantMix::Q4_0:
      if (is_output) {
        type = DType::Q6_K;
      } else if (with_importance && layer && down && *layer < n_layer / 8) {
        type = DType::Q4_1;  // llama-quantize's guard for the first ffn_down layers
      }
      break;
    case QuantMix::Q6_K:
      if (is_output) type = DType::Q6_K;
      break;
    case QuantMix::Q3_K_M:
      if (is_output) {
        type = DType::Q6_K;
      } else if (layer && values) {
        type = *layer < 2 ? DType::Q5_K : DType::Q4_K;
      } else if (layer && down) {
        type = *layer < n_layer / 16 ? DType::Q5_K : DType::Q4_K;
      } else if (name.ends_with(".attn_output.weight")) {
        type = DType::Q4_K;
      }
      break;
    default:  // Q4_K_M, Q5_K_M
      if (is_output || (layer && (values || down) && use_more_bits(*layer, n_layer)))
        type = DType::Q6_K;
      break;
  }
  return fallback(type, row_length);
}

}  // namespace trellis
