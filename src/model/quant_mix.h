// llama.cpp's file types ("Q4_K_M", "Q4_0", ...): which type each weight matrix of a model gets,
// so that synthesized and quantized files have the same type mix as the files people download.
//
// Q4_K_M, Q5_K_M (base Q4_K / Q5_K):
//   output matrix (output.weight, or token_embd.weight when the output is tied)   Q6_K
//   attn_v / attn_qkv and ffn_down of layer i: Q6_K when use_more_bits(i, n_layer), else the base
//   every other matrix                                                            the base
//   use_more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2
// Q3_K_M (base Q3_K): output Q6_K; attn_v / attn_qkv of layers 0 and 1 Q5_K, of the others Q4_K;
//   ffn_down of layers i < n/16 Q5_K, of the others Q4_K; attn_output Q4_K.
// Q4_0, Q6_K: every matrix the base, the output Q6_K. Q8_0: every matrix Q8_0.
// A matrix whose rows cannot hold the type's blocks falls back as llama.cpp does: Q3_K -> Q4_0,
// Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, then F16 when even 32 does not divide the rows.
// 1-D tensors, norms, a MoE router (ffn_gate_inp) and bert's position and token-type tables are
// not quantized (quant_mix_quantizes).
//
// MXFP4_MOE (gpt-oss's own files): the experts' stacked matrices (ffn_*_exps) MXFP4, every other
// matrix Q8_0, the output included.
//
// Not followed: llama.cpp's special cases for models of 8 experts, Falcon and 70B shapes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "tensor/dtype.h"

namespace trellis {

enum class QuantMix { Q4_0, Q8_0, Q6_K, Q3_K_M, Q4_K_M, Q5_K_M, MXFP4_MOE };

// A file type's name as llama-quantize takes it ("q4_k_m", "Q8_0", ...; case-insensitive);
// nullopt for anything else.
std::optional<QuantMix> parse_quant_mix(std::string_view name);
// The mixed file types (those that are not also a single weight type's name).
inline constexpr std::string_view kQuantMixNames = "q3_k_m, q4_k_m, q5_k_m, mxfp4_moe";
// Every file type `trellis model quantize` writes.
inline constexpr std::string_view kQuantizeTypeNames = "q4_0, q8_0, q6_k, q3_k_m, q4_k_m, q5_k_m";
// The base type of the file type: Q4_0, Q8_0, Q6_K, Q3_K, Q4_K, Q5_K or MXFP4.
DType quant_mix_base(QuantMix mix);
// llama.cpp's general.file_type code: 2 (MOSTLY_Q4_0), 7 (Q8_0), 18 (Q6_K), 12 (Q3_K_M),
// 15 (Q4_K_M), 17 (Q5_K_M) or 38 (MXFP4_MOE).
uint32_t quant_mix_file_type(QuantMix mix);
// Whether the tensor `name` of n_dims dimensions is quantized at all (a weight matrix that is
// not a norm, a MoE router or a position or token-type table).
bool quant_mix_quantizes(std::string_view name, int n_dims);
// The type of the weight matrix `name` (GGUF tensor name) whose rows hold row_length values, in a
// model of n_layer layers whose output matrix is token_embd when `tied_output`.
// `with_importance`: an importance matrix weighs the quantization (llama-quantize then keeps q4_0's
// first eighth of ffn_down layers in q4_1).
DType quant_mix_type(QuantMix mix, std::string_view name, int64_t row_length, int64_t n_layer,
                     bool tied_output, bool with_importance = false);

}  // namespace trellis
