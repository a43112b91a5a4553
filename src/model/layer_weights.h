// One layer's weights, as the loader binds them from a family's tensor list
// (model/family_tensors.h names the member each tensor goes to).
#pragma once

#include <vector>

#include "kernels/matmul.h"

namespace trellis {

// A stacked expert tensor: matrix e of experts is expert e's ([n_in] -> [n_out] each).
struct ExpertWeights {
  std::vector<WeightView> experts;
};

// The optional ones are empty (vectors) or unbound (n_out 0) when the family does not use them.
// q: n_head * head_dim, kv: n_head_kv * head_dim values per token.
struct LayerWeights {
  std::vector<float> attn_norm;       // [n_embd]
  WeightView wq;                      // [n_embd] -> [q]
  WeightView wk;                      // [n_embd] -> [kv]
  WeightView wv;                      // [n_embd] -> [kv]
  WeightView wqkv;                    // [n_embd] -> [q + 2 kv], fused_qkv instead of wq, wk, wv
  std::vector<float> bq, bk, bv;      // [q], [kv], [kv] when qkv_bias
  std::vector<float> q_norm, k_norm;  // [head_dim] (PER_HEAD), or [q] and [kv] (WHOLE)
  WeightView wo;                      // [q] -> [n_embd]
  std::vector<float> bo;              // [n_embd] when output_bias
  std::vector<float> attn_sinks;      // [n_head] when attention_sinks
  std::vector<float> post_attn_norm;  // [n_embd] when post_norms
  std::vector<float> ffn_norm;        // [n_embd]
  WeightView w_gate;                  // [n_embd] -> [n_ff] (unbound when fused_gate_up)
  WeightView w_up;                    // [n_embd] -> [n_ff], or [2 n_ff]: gate then up
  WeightView w_down;                  // [n_ff] -> [n_embd]
  std::vector<float> post_ffn_norm;   // [n_embd] when post_norms
  // FfnKind::MOE instead of w_gate, w_up, w_down:
  WeightView router;                 // [n_embd] -> [n_expert]
  ExpertWeights gate_exps, up_exps;  // [n_embd] -> [n_ff_exp] per expert
  ExpertWeights down_exps;           // [n_ff_exp] -> [n_embd] per expert
  // expert_biases: the router's [n_expert], and per expert e its run e of
  // [n_expert][n_ff_exp] (gate, up) or [n_expert][n_embd] (down).
  std::vector<float> router_bias, gate_exps_bias, up_exps_bias, down_exps_bias;
  // The shared expert (qwen2moe): its gate's weights, and its FFN.
  std::vector<float> shared_gate;       // [n_embd]: sigmoid(shared_gate . h) scales its output
  WeightView w_gate_shexp, w_up_shexp;  // [n_embd] -> [n_ff_shexp]
  WeightView w_down_shexp;              // [n_ff_shexp] -> [n_embd]
};

}  // namespace trellis
