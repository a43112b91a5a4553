// What meets a model's weight matrices during forward passes, for those who measure it (an
// importance matrix, model/imatrix_collector.h). The model calls the observer on the thread that
// runs forward(), before each group of matrices that share one input.
#pragma once

#include <cstdint>

namespace trellis {

// The groups of a layer's matrices that read one input.
enum class MatmulInput {
  ATTENTION,         // attn_q, attn_k, attn_v (or attn_qkv): the normed residual
  ATTENTION_OUTPUT,  // attn_output: the heads' outputs
  FFN,               // ffn_gate, ffn_up: the normed residual
  FFN_DOWN,          // ffn_down: the activated gate times up
};

class ActivationObserver {
 public:
  virtual ~ActivationObserver() = default;
  // `rows`: n_rows rows of n_cols floats, the input of layer `layer`'s `input` matrices.
  virtual void observe(int64_t layer, MatmulInput input, const float* rows, int32_t n_rows,
                       int64_t n_cols) = 0;
};

}  // namespace trellis
