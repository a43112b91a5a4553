// llama.cpp's mixed K-quant file types ("Q4_K_M", "Q5_K_M"): which type each weight matrix of a
// model gets, so that synthesized files have the same type mix as the files people download.
//
//   output matrix (output.weight, or token_embd.weight when the output is tied)   Q6_K
//   attn_v / attn_qkv and ffn_down of layer i: Q6_K when use_more_bits(i, n_layer), else the base
//   every other matrix                                                            the base
//   use_more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2
// A matrix whose rows are not a multiple of 256 values cannot hold K blocks and falls back as
// llama.cpp does: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0. 1-D tensors stay f32.
//
// MXFP4_MOE (gpt-oss's own files): the experts' stacked matrices (ffn_*_exps) MXFP4, every other
// matrix Q8_0, the output included.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "tensor/dtype.h"

namespace trellis {

enum class QuantMix { Q4_K_M, Q5_K_M, MXFP4_MOE };

// "q4_k_m", "q5_k_m" or "mxfp4_moe" (case-insensitive); nullopt for anything else.
std::optional<QuantMix> parse_quant_mix(std::string_view name);
// "q4_k_m, q5_k_m, mxfp4_moe"
inline constexpr std::string_view kQuantMixNames = "q4_k_m, q5_k_m, mxfp4_moe";
// The base type of the mix: Q4_K, Q5_K or MXFP4.
DType quant_mix_base(QuantMix mix);
// llama.cpp's general.file_type code: 15 (MOSTLY_Q4_K_M), 17 (MOSTLY_Q5_K_M) or 38
// (MOSTLY_MXFP4_MOE).
uint32_t quant_mix_file_type(QuantMix mix);
// The type of the weight matrix `name` (GGUF tensor name) whose rows hold row_length values, in a
// model of n_layer layers whose output matrix is token_embd when `tied_output`.
DType quant_mix_type(QuantMix mix, std::string_view name, int64_t row_length, int64_t n_layer,
                     bool tied_output);

}  // namespace trellis
