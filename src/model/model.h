// A model of one of the supported families (model/architecture.h) bound to the weights of a GGUF
// file, and its one forward pass over a flat ForwardBatch reading and writing a block-paged KV
// cache. Per layer, with the blocks each family's description switches on in [brackets]:
//
//   h = rmsnorm(x)
//   q, k, v = Wq.h [+ bq], Wk.h [+ bk], Wv.h [+ bv]        (or one fused Wqkv.h)
//   [q, k = per-head rmsnorm(q), rmsnorm(k)]
//   q, k = rope(q), rope(k)                                (pair style, base, scale per layer)
//   a = Wo . attention(q, K, V)                            (causal [, sliding window])
//   x += [rmsnorm](a)
//   h = rmsnorm(x)
//   x += [rmsnorm](Wdown . (act(Wgate.h) * (Wup.h)))       (act: silu or gelu-tanh; [fused])
//     or x += moe_ffn(h)                                   (a mixture of experts, model/moe_ffn.h)
//
// after the embedding lookup [scaled by sqrt(n_embd)]; then logits = Woutput . rmsnorm(x) for the
// rows asked for (Woutput: output.weight, or the embeddings when the file ties them).
#pragma once

#include <memory>
#include <vector>

#include "base/result.h"
#include "base/thread_pool.h"
#include "batch/forward_batch.h"
#include "gguf/gguf_file.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/weight_pack.h"
#include "kv/kv_storage.h"
#include "model/activation_observer.h"
#include "model/architecture.h"
#include "model/family_tensors.h"
#include "model/layer_range.h"
#include "model/layer_weights.h"
#include "model/model_hparams.h"
#include "model/moe_ffn.h"

namespace trellis {

// Activation buffers for batches of up to max_rows tokens, allocated once.
class Workspace {
 public:
  Workspace(const ModelHParams& hp, int32_t max_rows);
  int32_t max_rows() const { return max_rows_; }

  std::vector<float> x;                      // [rows][n_embd] residual stream
  std::vector<float> xn;                     // [rows][n_embd] normed input of a sublayer
  std::vector<float> q;                      // [rows][q]
  std::vector<float> k;                      // [rows][kv]
  std::vector<float> v;                      // [rows][kv]
  std::vector<float> qkv;                    // [rows][q + 2 kv] output of a fused Wqkv
  std::vector<float> attn;                   // [rows][q]
  std::vector<float> proj;                   // [rows][n_embd] output of Wo / Wdown
  std::vector<float> gate;                   // [rows][n_ff]
  std::vector<float> up;                     // [rows][n_ff], or [rows][2 n_ff] when fused
  std::vector<float> out_xn;                 // [rows][n_embd] normed rows whose logits are wanted
  std::vector<AttentionRow> attention_rows;  // [rows]
  MoeScratch moe;                            // the MOE sublayer's buffers (mixtures of experts)
  MatmulScratch matmul_scratch;
  AttentionScratch attention_scratch;

 private:
  int32_t max_rows_;
};

class Model {
 public:
  // Binds the weights of `file`, which must outlive the model. Errors name the family and the
  // first missing or malformed tensor or key. With a `range`, only that part of the model is bound
  // (a pipeline stage): the other tensors are never read, so their pages never become resident.
  // Matrices that the active kernel variant reads faster in a layout of its own are repacked into
  // memory the model owns (pack_weights).
  static Result<std::unique_ptr<Model>> load(const GgufFile& file);
  static Result<std::unique_ptr<Model>> load(const GgufFile& file, const LayerRange& range);

  const ModelHParams& hparams() const { return hp_; }
  const Architecture& architecture() const { return *arch_; }
  const LayerRange& layer_range() const { return range_; }
  // The KV layout of the layers this model holds, for a given block size and element types.
  KvLayout kv_layout(int32_t block_size, KvTypes types) const;

  // Runs the batch, writing each row's K/V (of the layers held) into the cache. The first stage
  // (a whole model is one) embeds the batch's tokens into ws.x; a later stage finds the previous
  // stage's hidden rows there. The last stage stores the logits of batch.output_rows into logits
  // ([output_rows.size()][n_vocab]); an earlier one leaves its hidden rows in ws.x for the next.
  // Preconditions: the batch fits the workspace; every sequence's block table covers its last
  // position; tokens are in the vocab.
  void forward(const ForwardBatch& batch, KvStorage& kv, Workspace& ws, ThreadPool& pool,
               float* logits) const;

  // The same pass without the output matrix: the rows of batch.output_rows come out as the final
  // normed hidden states ([output_rows.size()][n_embd]), what a decoder embedding model pools.
  // Precondition: a whole model (not a pipeline stage).
  void forward_hidden(const ForwardBatch& batch, KvStorage& kv, Workspace& ws, ThreadPool& pool,
                      float* hidden) const;

  // Fixes what depends on the longest sequence the caller will run (n_ctx tokens): a LongRoPE
  // file uses its long factors when n_ctx exceeds rope.scaling.original_context_length, else its
  // short ones, as llama.cpp chooses. load() chooses for the training context.
  void set_context_length(int64_t n_ctx);

  // Tells `observer` (null: none) of every matrix input of the layers' dense parts (a mixture of
  // experts' feed-forward is not observed); it must outlive the model's forward passes.
  void set_observer(ActivationObserver* observer) { observer_ = observer; }

  // Checks what forward() takes as preconditions, with a clear message.
  Status validate_batch(const ForwardBatch& batch, const KvStorage& kv, const Workspace& ws) const;

 private:
  Status bind_layer(const GgufFile& file, int64_t il, LayerWeights& layer) const;
  // A stacked expert tensor, or (Mixtral's older files) one tensor per expert.
  Status bind_experts(const GgufFile& file, int64_t il, const TensorSpec& spec,
                      ExpertWeights& out) const;
  // Every matrix that matmul reads (the embeddings are read by row lookup, not matmul).
  std::vector<WeightView*> matmul_weights();
  // Repacks the matmul weights that best_kernel_isa() has a packed layout for
  // (kernels/weight_pack.h) into packed_, and drops the file's copies from resident memory, so
  // that the model does not hold both.
  void pack_weights(const GgufFile& file);
  // rope_freqs (llama) or rope_factors_short/long (phi3), when the file has them.
  Status bind_rope_factors(const GgufFile& file);
  void embed(const ForwardBatch& batch, Workspace& ws) const;
  // Every layer this model holds, over the batch (the embedding first, on the first stage).
  void run_layers(const ForwardBatch& batch, KvStorage& kv, Workspace& ws, ThreadPool& pool) const;
  // ws.out_xn row i = the final norm of batch.output_rows[i]'s hidden row.
  void norm_output_rows(const ForwardBatch& batch, Workspace& ws) const;
  // q, k, v of every row, biased and normed as the family wants, not yet rotated.
  void project_qkv(const LayerWeights& layer, int32_t n_rows, Workspace& ws,
                   ThreadPool& pool) const;
  // Rotates q and k of rows [row_begin, row_end).
  void rope(int64_t il, int64_t row_begin, int64_t row_end, Workspace& ws) const;
  void scale_queries(int32_t n_rows, Workspace& ws) const;
  void attention_block(const LayerWeights& layer, int64_t il, const ForwardBatch& batch,
                       KvStorage& kv, Workspace& ws, ThreadPool& pool) const;
  void ffn_block(const LayerWeights& layer, int64_t il, int32_t n_rows, Workspace& ws,
                 ThreadPool& pool) const;
  void observe(int64_t il, MatmulInput input, const std::vector<float>& rows, int32_t n_rows,
               int64_t n_cols) const {
    if (observer_ != nullptr) observer_->observe(il, input, rows.data(), n_rows, n_cols);
  }
  // x += rmsnorm(proj) with `post_norm` when the family has post norms, else x += proj.
  void add_residual(const std::vector<float>& post_norm, int32_t n_rows, Workspace& ws,
                    ThreadPool& pool) const;
  // xn = rmsnorm(x) * weight, row by row.
  void norm_rows(const std::vector<float>& weight, int32_t n_rows, Workspace& ws,
                 ThreadPool& pool) const;

  const Architecture* arch_ = nullptr;
  ModelHParams hp_;
  LayerRange range_;
  WeightView token_embd_;             // [n_embd] x n_vocab rows
  std::vector<LayerWeights> layers_;  // blocks range_.begin .. range_.end - 1
  // [n_rot / 2] frequency divisors, empty when none: rope_freqs or LongRoPE's short factors,
  // and LongRoPE's long ones, used instead when use_rope_long_ (see set_context_length).
  std::vector<float> rope_short_;
  std::vector<float> rope_long_;
  bool use_rope_long_ = false;
  std::vector<float> output_norm_;
  WeightView output_;   // token_embd_ when the file ties them
  PackedBytes packed_;  // the packed matrices, back to back
  ActivationObserver* observer_ = nullptr;
};

}  // namespace trellis
