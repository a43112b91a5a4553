// A Llama-architecture model bound to the weights of a GGUF file, and its forward pass over a
// flat ForwardBatch reading and writing a block-paged KV cache.
//
// Per layer: x += Wo . attention(rope(Wq . rmsnorm(x)), rope(Wk . rmsnorm(x)), Wv . rmsnorm(x))
//            x += Wdown . (silu(Wgate . rmsnorm(x)) * (Wup . rmsnorm(x)))
// then logits = Woutput . rmsnorm(x) for the rows asked for.
#pragma once

#include <memory>
#include <vector>

#include "base/result.h"
#include "base/thread_pool.h"
#include "batch/forward_batch.h"
#include "gguf/gguf_file.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kv/kv_storage.h"
#include "model/llama_hparams.h"

namespace trellis {

struct LlamaLayer {
  std::vector<float> attn_norm;  // [n_embd]
  WeightView wq;                 // [n_embd] -> [n_embd]
  WeightView wk;                 // [n_embd] -> [n_embd_kv]
  WeightView wv;                 // [n_embd] -> [n_embd_kv]
  WeightView wo;                 // [n_embd] -> [n_embd]
  std::vector<float> ffn_norm;   // [n_embd]
  WeightView w_gate;             // [n_embd] -> [n_ff]
  WeightView w_up;               // [n_embd] -> [n_ff]
  WeightView w_down;             // [n_ff] -> [n_embd]
};

// Activation buffers for batches of up to max_rows tokens, allocated once.
class LlamaWorkspace {
 public:
  LlamaWorkspace(const LlamaHParams& hp, int32_t max_rows);
  int32_t max_rows() const { return max_rows_; }

  std::vector<float> x;                      // [rows][n_embd] residual stream
  std::vector<float> xn;                     // [rows][n_embd] normed input of a sublayer
  std::vector<float> q;                      // [rows][n_embd]
  std::vector<float> k;                      // [rows][n_embd_kv]
  std::vector<float> v;                      // [rows][n_embd_kv]
  std::vector<float> attn;                   // [rows][n_embd]
  std::vector<float> proj;                   // [rows][n_embd] output of Wo / Wdown
  std::vector<float> gate;                   // [rows][n_ff]
  std::vector<float> up;                     // [rows][n_ff]
  std::vector<float> out_xn;                 // [rows][n_embd] normed rows whose logits are wanted
  std::vector<AttentionRow> attention_rows;  // [rows]
  MatmulScratch matmul_scratch;
  AttentionScratch attention_scratch;

 private:
  int32_t max_rows_;
};

class LlamaModel {
 public:
  // Binds the weights of `file`, which must outlive the model. Errors name the missing or
  // malformed tensor.
  static Result<std::unique_ptr<LlamaModel>> load(const GgufFile& file);

  const LlamaHParams& hparams() const { return hp_; }
  // The KV layout this model needs, for a given block size and element type.
  KvLayout kv_layout(int32_t block_size, KvType type) const;

  // Runs the batch, writing each row's K/V into the cache, and stores the logits of
  // batch.output_rows into logits ([output_rows.size()][n_vocab]). Preconditions: the batch fits
  // the workspace; every sequence's block table covers its last position; tokens are in the vocab.
  void forward(const ForwardBatch& batch, KvStorage& kv, LlamaWorkspace& ws, ThreadPool& pool,
               float* logits) const;

  // Checks what forward() takes as preconditions, with a clear message.
  Status validate_batch(const ForwardBatch& batch, const KvStorage& kv,
                        const LlamaWorkspace& ws) const;

 private:
  void embed(const ForwardBatch& batch, LlamaWorkspace& ws) const;
  void attention_block(const LlamaLayer& layer, int64_t il, const ForwardBatch& batch,
                       KvStorage& kv, LlamaWorkspace& ws, ThreadPool& pool) const;
  void ffn_block(const LlamaLayer& layer, int32_t n_rows, LlamaWorkspace& ws,
                 ThreadPool& pool) const;

  LlamaHParams hp_;
  WeightView token_embd_;  // [n_embd] x n_vocab rows
  std::vector<LlamaLayer> layers_;
  std::vector<float> output_norm_;
  WeightView output_;  // token_embd_ when the file ties them
};

}  // namespace trellis
