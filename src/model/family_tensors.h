// The tensors a family's GGUF files hold: names, shapes in terms of the hyperparameters, whether
// each is required, and where the loader binds it. Model::load binds from this list and
// synth_tensor_list writes from it, so a synthesized file holds exactly what the loader reads,
// and a file that lacks a required tensor is rejected by its name.
//
// The list is derived from the family's row (model/architecture.h): each block the row switches
// on contributes its tensors, and the FFN kind selects the FFN's (dense now; mixture of experts
// next). Order is file order, the order llama.cpp's converter writes a layer in.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/architecture.h"
#include "model/layer_weights.h"
#include "model/model_hparams.h"

namespace trellis {

// One dimension of a tensor, resolved against a model's hyperparameters by tensor_shape().
enum class Dim {
  NONE,        // past the tensor's last dimension
  EMBD,        // n_embd
  VOCAB,       // n_vocab
  Q,           // n_head * head size
  KV,          // n_head_kv * head size
  QKV,         // Q + 2 KV: a fused q/k/v projection
  FF,          // n_ff
  FF_GATE_UP,  // 2 n_ff: a fused gate/up projection
  HEAD,        // the head size
  ROPE_PAIRS,  // n_rot / 2
  EXPERTS,     // n_expert
  FF_EXP,      // n_ff_exp: one expert's FFN length
  FF_SHEXP,    // n_ff_shexp: the shared expert's FFN length
  HEADS,       // n_head: one value per query head
};

enum class TensorKind {
  MATRIX,        // read by matmul; synthesized N(0, σ²)
  EXPERTS,       // one matrix per expert, stacked (shape[2] experts); synthesized N(0, σ²)
  ROUTER,        // a MoE router: read by matmul, kept f32 (as llama.cpp's quantizer does);
                 // synthesized N(0, 1 / n_embd) so that router scores spread by about 1
  BIAS,          // added to a projection's output; synthesized N(0, σ²)
  NORM,          // RMSNorm weights; synthesized as ones
  ROPE_FACTORS,  // per-pair frequency divisors; synthesized from the preset's rope scaling
  SINKS,         // attention sinks, one logit per head; synthesized N(0, 1) (trained ones are of
                 // the order of the attention scores)
};

struct TensorSpec {
  std::string_view name;  // the whole name, or what follows "blk.N." for a layer's tensor
  TensorKind kind;
  std::array<Dim, 3> shape;  // GGUF order (shape[0] is the row length), NONE-padded
  Presence presence = Presence::REQUIRED;
  // Where the loader binds a layer's tensor: `matrix` for a MATRIX or ROUTER, `experts` for
  // EXPERTS, `vector` for the others. Null in the tensors outside the layers, which the loader
  // binds by name.
  WeightView LayerWeights::*matrix = nullptr;
  std::vector<float> LayerWeights::*vector = nullptr;
  ExpertWeights LayerWeights::*experts = nullptr;
};

// The tensors outside the layers, which the loader binds by these names.
inline constexpr TensorSpec kTokenEmbd = {
    .name = "token_embd.weight", .kind = TensorKind::MATRIX, .shape = {Dim::EMBD, Dim::VOCAB}};
inline constexpr TensorSpec kOutputNorm = {
    .name = "output_norm.weight", .kind = TensorKind::NORM, .shape = {Dim::EMBD}};
// Absent when the logits reuse token_embd (tied embeddings).
inline constexpr TensorSpec kOutput = {.name = "output.weight",
                                       .kind = TensorKind::MATRIX,
                                       .shape = {Dim::EMBD, Dim::VOCAB},
                                       .presence = Presence::OPTIONAL};
// RopeFactors::FREQS; absent in files without Llama 3 scaling.
inline constexpr TensorSpec kRopeFreqs = {.name = "rope_freqs.weight",
                                          .kind = TensorKind::ROPE_FACTORS,
                                          .shape = {Dim::ROPE_PAIRS},
                                          .presence = Presence::OPTIONAL};
// RopeFactors::LONGROPE; absent in files without LongRoPE (Phi-3-mini-4k).
inline constexpr TensorSpec kRopeFactorsShort = {.name = "rope_factors_short.weight",
                                                 .kind = TensorKind::ROPE_FACTORS,
                                                 .shape = {Dim::ROPE_PAIRS},
                                                 .presence = Presence::OPTIONAL};
inline constexpr TensorSpec kRopeFactorsLong = {.name = "rope_factors_long.weight",
                                                .kind = TensorKind::ROPE_FACTORS,
                                                .shape = {Dim::ROPE_PAIRS},
                                                .presence = Presence::OPTIONAL};

// A family's tensors in file order: before_layers, then `layer` for each layer, then
// after_layers.
struct FamilyTensors {
  std::vector<TensorSpec> before_layers;  // token_embd
  std::vector<TensorSpec> layer;          // named after "blk.N."
  std::vector<TensorSpec> after_layers;   // output_norm, output, the rope factors the family has
};

// The list of `arch`, a supported family (one of architectures()); built once per family.
const FamilyTensors& family_tensors(const Architecture& arch);

// "blk.<il>.<spec.name>"
std::string layer_tensor_name(int64_t il, const TensorSpec& spec);
// The shape `spec` has in a model of hyperparameters `hp`, GGUF order, without the NONEs.
std::vector<int64_t> tensor_shape(const TensorSpec& spec, const ModelHParams& hp);

}  // namespace trellis
