// One layer's weights, as the loader binds them from a family's tensor list
// (model/family_tensors.h names the member each tensor goes to).
#pragma once

#include <vector>

#include "kernels/matmul.h"

namespace trellis {

// The optional ones are empty (vectors) or unbound (n_out 0) when the family does not use them.
// q: n_head * head_dim, kv: n_head_kv * head_dim values per token.
struct LayerWeights {
  std::vector<float> attn_norm;       // [n_embd]
  WeightView wq;                      // [n_embd] -> [q]
  WeightView wk;                      // [n_embd] -> [kv]
  WeightView wv;                      // [n_embd] -> [kv]
  WeightView wqkv;                    // [n_embd] -> [q + 2 kv], fused_qkv instead of wq, wk, wv
  std::vector<float> bq, bk, bv;      // [q], [kv], [kv] when qkv_bias
  std::vector<float> q_norm, k_norm;  // [head_dim] when qk_norm
  WeightView wo;                      // [q] -> [n_embd]
  std::vector<float> post_attn_norm;  // [n_embd] when post_norms
  std::vector<float> ffn_norm;        // [n_embd]
  WeightView w_gate;                  // [n_embd] -> [n_ff] (unbound when fused_gate_up)
  WeightView w_up;                    // [n_embd] -> [n_ff], or [2 n_ff]: gate then up
  WeightView w_down;                  // [n_ff] -> [n_embd]
  std::vector<float> post_ffn_norm;   // [n_embd] when post_norms
};

}  // namespace trellis
