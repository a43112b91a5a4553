// An encoder (model/encoder_hparams.h: bert, nomic-bert) bound to a GGUF file's weights, and its
// forward pass over a batch of whole inputs. Per input of n tokens, rows 0..n-1:
//
//   x = layernorm(tok_embd[t] + token_types[0] [+ position_embd[pos]])
//   per layer:
//     q, k, v = Wq.x + bq, Wk.x + bk, Wv.x + bv               (or one fused Wqkv.x [+ bqkv])
//     [q, k = rope(q), rope(k)]                               (rotary families)
//     a = Wo . attention(q, K, V) [+ bo]                      (every row sees every row)
//     x = layernorm(x + a)
//     f = Wdown . gelu(Wup.x + bup) + bdown                   (or Wdown . (silu(Wgate.x) * Wup.x))
//     x = layernorm(x + f)
//   then the pooling: the mean of the rows, the first row or the last; a reranker's first row
//   goes through the classification head: cls_out . tanh(cls . x + cls_b) + cls_out_b (the
//   first product only where the file has `cls.weight`).
//
// Token types are all 0 ("sentence A"), as llama.cpp has them. Every step is row-wise or per
// input, and the matmuls are batch-invariant, so an input's output does not depend on what else
// is in the batch.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/result.h"
#include "base/thread_pool.h"
#include "base/token_id.h"
#include "gguf/gguf_file.h"
#include "kernels/matmul.h"
#include "kernels/weight_pack.h"
#include "model/encoder_attention.h"
#include "model/encoder_hparams.h"

namespace trellis {

// Activation buffers for batches of up to max_rows tokens, allocated once.
class EncoderWorkspace {
 public:
  EncoderWorkspace(const EncoderHParams& hp, int32_t max_rows, int n_threads);
  int32_t max_rows() const { return max_rows_; }

  std::vector<float> x;                    // [rows][n_embd] the hidden rows
  std::vector<float> q, k, v;              // [rows][n_embd]
  std::vector<float> qkv;                  // [rows][3 n_embd] a fused projection's output
  std::vector<float> attn;                 // [rows][n_embd]
  std::vector<float> proj;                 // [rows][n_embd] output of Wo / Wdown
  std::vector<float> up;                   // [rows][n_ff]
  std::vector<float> gate;                 // [rows][n_ff] (gated FFNs)
  std::vector<std::unique_ptr<EncoderAttentionScratch>> attention;  // per thread
  std::vector<float> head;                 // [n_embd] after the reranker's dense layer
  MatmulScratch matmul_scratch;

 private:
  int32_t max_rows_;
};

class EncoderModel {
 public:
  // Binds the weights of `file`, which must outlive the model. Errors name the family and the
  // first missing or malformed tensor or key.
  static Result<std::unique_ptr<EncoderModel>> load(const GgufFile& file);

  const EncoderHParams& hparams() const { return hp_; }
  // Floats per input of encode()'s output: n_embd, or a reranker's n_cls_out scores.
  int64_t n_out() const;

  // Whether one input may be encoded: 1 to n_ctx_train tokens of the vocab; the error says what
  // is wrong ("is empty", "has 600 tokens, more than ...").
  Status validate_input(std::span<const TokenId> input) const;
  // Checks encode()'s preconditions with a clear message: each input valid, together at most
  // ws.max_rows() tokens.
  Status validate(std::span<const std::span<const TokenId>> inputs,
                  const EncoderWorkspace& ws) const;
  // Runs the inputs and writes input i's pooled vector (not normalized) or scores to
  // out[i * n_out()]. Preconditions: validate() passes.
  void encode(std::span<const std::span<const TokenId>> inputs, EncoderWorkspace& ws,
              ThreadPool& pool, float* out) const;

 private:
  struct Layer {
    WeightView wq, wk, wv, wqkv, wo;
    std::vector<float> bq, bk, bv, bqkv, bo;
    std::vector<float> attn_norm, attn_norm_b;  // attn_output_norm
    WeightView w_up, w_gate, w_down;
    std::vector<float> b_up, b_down;
    std::vector<float> out_norm, out_norm_b;  // layer_output_norm
  };
  // One input's rows in the batch, [begin, end).
  struct Span {
    int32_t begin;
    int32_t end;
  };

  Status bind(const GgufFile& file);
  Status bind_layer(const GgufFile& file, int64_t il, Layer& layer) const;
  void embed(std::span<const std::span<const TokenId>> inputs, EncoderWorkspace& ws,
             ThreadPool& pool) const;
  void attention(const Layer& layer, std::span<const Span> spans, EncoderWorkspace& ws,
                 ThreadPool& pool) const;
  void ffn(const Layer& layer, int32_t n_rows, EncoderWorkspace& ws, ThreadPool& pool) const;
  // x = layernorm(x + proj) with the given weight and bias, row by row.
  void add_and_norm(const std::vector<float>& weight, const std::vector<float>& bias,
                    int32_t n_rows, EncoderWorkspace& ws, ThreadPool& pool) const;
  void pool_rows(Span span, EncoderWorkspace& ws, ThreadPool& pool, float* out) const;

  EncoderHParams hp_;
  WeightView token_embd_;
  std::vector<float> token_type0_;  // row 0 of token_types; empty when the file has none
  WeightView position_embd_;        // absolute positions only
  std::vector<float> embd_norm_, embd_norm_b_;
  std::vector<Layer> layers_;
  // The classification head (RANK): cls is optional, cls_out required.
  WeightView cls_, cls_out_;
  std::vector<float> cls_b_, cls_out_b_;
  PackedBytes packed_;
};

}  // namespace trellis
