// Embedder over a decoder family's file whose ARCH.pooling_type asks for an embedding model
// (LAST: Qwen3-Embedding's last-token vector) or a reranker (RANK: cls.output.weight turns the
// last token's hidden state into a "yes"/"no" pair whose softmax gives the relevance, as
// Qwen3-Reranker's card describes and llama.cpp computes it).
//
// The inputs of a call share what they have in common: their longest common prefix (an
// instruction, a reranker's prompt and query) is computed once into KV blocks, and every input
// continues from it, its block table starting with the prefix's full blocks and a copy of its
// partial one. Causal attention makes that exact: an input's result is what it would be alone.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "batch/forward_batch.h"
#include "embed/embedder.h"
#include "kv/kv_storage.h"
#include "model/model.h"

namespace trellis {

class DecoderEmbedder : public Embedder {
 public:
  static Result<std::unique_ptr<Embedder>> open(std::unique_ptr<GgufFile> file,
                                                std::unique_ptr<Tokenizer> tokenizer,
                                                const EmbedderOptions& options);

  Pooling pooling() const override { return pooling_; }
  int64_t n_out() const override;
  int32_t n_ctx() const override { return n_ctx_; }
  int64_t n_vocab() const override { return model_->hparams().n_vocab; }
  int n_threads() const override { return pool_.size(); }
  const Tokenizer& tokenizer() const override { return *tokenizer_; }
  const std::string& rerank_prompt() const override { return rerank_prompt_; }
  Status check_input(std::span<const TokenId> input) const override;
  Result<std::vector<std::vector<float>>> embed(
      std::span<const std::vector<TokenId>> inputs) override;

  // Prefix tokens computed once and shared, over all calls so far (for tests and benchmarks).
  int64_t n_shared_tokens() const { return n_shared_tokens_; }

 private:
  DecoderEmbedder(std::unique_ptr<GgufFile> file, std::unique_ptr<Model> model,
                  std::unique_ptr<Tokenizer> tokenizer, const EmbedderOptions& options);
  // The inputs [begin, end) that one run takes from `begin`: while their suffixes fit the
  // workspace and their blocks the storage.
  size_t group_end(std::span<const std::vector<TokenId>> inputs, size_t begin) const;
  // Runs inputs [begin, end) (sharing their common prefix) into out.
  void run_group(std::span<const std::vector<TokenId>> inputs, size_t begin, size_t end,
                 std::vector<std::vector<float>>& out);
  // Computes positions [0, n) of `tokens` into the blocks of `table`, with no output rows.
  void prefill(const TokenId* tokens, int32_t n, const std::vector<int32_t>& table);
  // The pooled output of one input from its last token's hidden state.
  std::vector<float> pool_hidden(const float* hidden);

  std::unique_ptr<GgufFile> file_;  // the weights point into its mapping
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  Pooling pooling_ = Pooling::LAST;
  WeightView cls_out_;  // RANK: [n_embd] -> [n_cls_out]
  std::string rerank_prompt_;
  int32_t n_ctx_ = 0;
  int32_t block_size_ = 32;
  ThreadPool pool_;
  std::unique_ptr<Workspace> ws_;
  std::unique_ptr<KvStorage> kv_;
  ForwardBatch batch_;
  int64_t n_shared_tokens_ = 0;
};

}  // namespace trellis
