#include "model/family_tensors.h"

#include <cassert>

namespace trellis {
namespace {

using LW = LayerWeights;
constexpr Dim EMBD = Dim::EMBD, Q = Dim::Q, KV = Dim::KV, FF = Dim::FF, HEAD = Dim::HEAD,
              EXPERTS = Dim::EXPERTS, FF_EXP = Dim::FF_EXP, FF_SHEXP = Dim::FF_SHEXP;

constexpr TensorSpec matrix(std::string_view name, Dim n_in, Dim n_out, WeightView LW::*member) {
  return {.name = name, .kind = TensorKind::MATRIX, .shape = {n_in, n_out}, .matrix = member};
}
constexpr TensorSpec experts(std::string_view name, Dim n_in, Dim n_out,
                             ExpertWeights LW::*member) {
  return {.name = name,
          .kind = TensorKind::EXPERTS,
          .shape = {n_in, n_out, EXPERTS},
          .experts = member};
}
constexpr TensorSpec vector_tensor(std::string_view name, TensorKind kind, Dim n,
                                   std::vector<float> LW::*member) {
  return {.name = name, .kind = kind, .shape = {n}, .vector = member};
}
constexpr TensorSpec norm(std::string_view name, Dim n, std::vector<float> LW::*member) {
  return vector_tensor(name, TensorKind::NORM, n, member);
}
constexpr TensorSpec bias(std::string_view name, Dim n, std::vector<float> LW::*member) {
  return vector_tensor(name, TensorKind::BIAS, n, member);
}
// One bias per expert, stacked: [n_expert][n] values.
constexpr TensorSpec expert_bias(std::string_view name, Dim n, std::vector<float> LW::*member) {
  return {.name = name, .kind = TensorKind::BIAS, .shape = {n, EXPERTS}, .vector = member};
}

// The attention sublayer: its norm, then the blocks the row switches on.
void add_attention(const Architecture& arch, std::vector<TensorSpec>& out) {
  out.push_back(norm("attn_norm.weight", EMBD, &LW::attn_norm));
  if (arch.fused_qkv) {
    out.push_back(matrix("attn_qkv.weight", EMBD, Dim::QKV, &LW::wqkv));
  } else {
    out.push_back(matrix("attn_q.weight", EMBD, Q, &LW::wq));
    out.push_back(matrix("attn_k.weight", EMBD, KV, &LW::wk));
    out.push_back(matrix("attn_v.weight", EMBD, KV, &LW::wv));
  }
  if (arch.qkv_bias) {
    out.push_back(bias("attn_q.bias", Q, &LW::bq));
    out.push_back(bias("attn_k.bias", KV, &LW::bk));
    out.push_back(bias("attn_v.bias", KV, &LW::bv));
  }
  if (arch.qk_norm != QkNorm::NONE) {
    const bool whole = arch.qk_norm == QkNorm::WHOLE;
    out.push_back(norm("attn_q_norm.weight", whole ? Q : HEAD, &LW::q_norm));
    out.push_back(norm("attn_k_norm.weight", whole ? KV : HEAD, &LW::k_norm));
  }
  out.push_back(matrix("attn_output.weight", Q, EMBD, &LW::wo));
  if (arch.output_bias) out.push_back(bias("attn_output.bias", EMBD, &LW::bo));
  if (arch.attention_sinks) {
    out.push_back({.name = "attn_sinks.weight",
                   .kind = TensorKind::SINKS,
                   .shape = {Dim::HEADS},
                   .vector = &LW::attn_sinks});
  }
  if (arch.post_norms) out.push_back(norm("post_attention_norm.weight", EMBD, &LW::post_attn_norm));
}

// The FFN sublayer of kind DENSE.
void add_dense_ffn(const Architecture& arch, std::vector<TensorSpec>& out) {
  out.push_back(norm(arch.ffn_norm_name, EMBD, &LW::ffn_norm));
  if (arch.fused_gate_up) {
    out.push_back(matrix("ffn_up.weight", EMBD, Dim::FF_GATE_UP, &LW::w_up));
  } else {
    out.push_back(matrix("ffn_gate.weight", EMBD, FF, &LW::w_gate));
    out.push_back(matrix("ffn_up.weight", EMBD, FF, &LW::w_up));
  }
  out.push_back(matrix("ffn_down.weight", FF, EMBD, &LW::w_down));
  if (arch.post_norms) out.push_back(norm("post_ffw_norm.weight", EMBD, &LW::post_ffn_norm));
}

// The FFN sublayer of kind MOE: the router, the stacked experts, and the shared expert when the
// family has one.
void add_moe_ffn(const Architecture& arch, std::vector<TensorSpec>& out) {
  out.push_back(norm(arch.ffn_norm_name, EMBD, &LW::ffn_norm));
  out.push_back({.name = "ffn_gate_inp.weight",
                 .kind = TensorKind::ROUTER,
                 .shape = {EMBD, EXPERTS},
                 .matrix = &LW::router});
  out.push_back(experts("ffn_gate_exps.weight", EMBD, FF_EXP, &LW::gate_exps));
  out.push_back(experts("ffn_down_exps.weight", FF_EXP, EMBD, &LW::down_exps));
  out.push_back(experts("ffn_up_exps.weight", EMBD, FF_EXP, &LW::up_exps));
  if (arch.expert_biases) {
    out.push_back(bias("ffn_gate_inp.bias", EXPERTS, &LW::router_bias));
    out.push_back(expert_bias("ffn_gate_exps.bias", FF_EXP, &LW::gate_exps_bias));
    out.push_back(expert_bias("ffn_down_exps.bias", EMBD, &LW::down_exps_bias));
    out.push_back(expert_bias("ffn_up_exps.bias", FF_EXP, &LW::up_exps_bias));
  }
  if (arch.shared_expert) {
    out.push_back(bias("ffn_gate_inp_shexp.weight", EMBD, &LW::shared_gate));
    out.push_back(matrix("ffn_gate_shexp.weight", EMBD, FF_SHEXP, &LW::w_gate_shexp));
    out.push_back(matrix("ffn_down_shexp.weight", FF_SHEXP, EMBD, &LW::w_down_shexp));
    out.push_back(matrix("ffn_up_shexp.weight", EMBD, FF_SHEXP, &LW::w_up_shexp));
  }
}

FamilyTensors tensors_of(const Architecture& arch) {
  FamilyTensors list;
  list.before_layers = {kTokenEmbd};
  add_attention(arch, list.layer);
  switch (arch.ffn_kind) {
    case FfnKind::DENSE:
      add_dense_ffn(arch, list.layer);
      break;
    case FfnKind::MOE:
      add_moe_ffn(arch, list.layer);
      break;
  }
  list.after_layers = {kOutputNorm, kOutput};
  switch (arch.rope_factors) {
    case RopeFactors::NONE:
      break;
    case RopeFactors::FREQS:
      list.after_layers.push_back(kRopeFreqs);
      break;
    case RopeFactors::LONGROPE:
      list.after_layers.push_back(kRopeFactorsShort);
      list.after_layers.push_back(kRopeFactorsLong);
      break;
  }
  return list;
}

int64_t dim_size(Dim dim, const ModelHParams& hp) {
  switch (dim) {
    case Dim::NONE:
      break;
    case Dim::EMBD:
      return hp.n_embd;
    case Dim::VOCAB:
      return hp.n_vocab;
    case Dim::Q:
      return hp.n_embd_q();
    case Dim::KV:
      return hp.n_embd_kv();
    case Dim::QKV:
      return hp.n_embd_q() + 2 * hp.n_embd_kv();
    case Dim::FF:
      return hp.n_ff;
    case Dim::FF_GATE_UP:
      return 2 * hp.n_ff;
    case Dim::HEAD:
      return hp.head_dim();
    case Dim::ROPE_PAIRS:
      return hp.n_rot / 2;
    case Dim::EXPERTS:
      return hp.n_expert;
    case Dim::HEADS:
      return hp.n_head;
    case Dim::FF_EXP:
      return hp.n_ff_exp;
    case Dim::FF_SHEXP:
      return hp.n_ff_shexp;
  }
  assert(false && "Dim::NONE has no size");
  return 0;
}

}  // namespace

const FamilyTensors& family_tensors(const Architecture& arch) {
  static const std::vector<FamilyTensors> lists =
      build_per_architecture([](const Architecture& a) { return tensors_of(a); });
  return lists[architecture_index(arch)];
}

std::string layer_tensor_name(int64_t il, const TensorSpec& spec) {
  return "blk." + std::to_string(il) + "." + std::string(spec.name);
}

std::vector<int64_t> tensor_shape(const TensorSpec& spec, const ModelHParams& hp) {
  std::vector<int64_t> shape;
  for (Dim dim : spec.shape) {
    if (dim == Dim::NONE) break;
    shape.push_back(dim_size(dim, hp));
  }
  return shape;
}

}  // namespace trellis
