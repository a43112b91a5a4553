// Embedder over an encoder file (bert, nomic-bert): model/encoder_model.h with its tokenizer,
// threads and activation buffers.
#pragma once

#include <memory>
#include <string>

#include "base/thread_pool.h"
#include "embed/embedder.h"
#include "model/encoder_model.h"

namespace trellis {

class EncoderEmbedder : public Embedder {
 public:
  static Result<std::unique_ptr<Embedder>> open(std::unique_ptr<GgufFile> file,
                                                std::unique_ptr<Tokenizer> tokenizer,
                                                const EmbedderOptions& options);

  Pooling pooling() const override { return model_->hparams().pooling; }
  int64_t n_out() const override { return model_->n_out(); }
  int32_t n_ctx() const override { return static_cast<int32_t>(model_->hparams().n_ctx_train); }
  int64_t n_vocab() const override { return model_->hparams().n_vocab; }
  int n_threads() const override { return pool_.size(); }
  const Tokenizer& tokenizer() const override { return *tokenizer_; }
  const std::string& rerank_prompt() const override { return rerank_prompt_; }
  Status check_input(std::span<const TokenId> input) const override {
    return model_->validate_input(input);
  }
  Result<std::vector<std::vector<float>>> embed(
      std::span<const std::vector<TokenId>> inputs) override;

 private:
  EncoderEmbedder(std::unique_ptr<GgufFile> file, std::unique_ptr<EncoderModel> model,
                  std::unique_ptr<Tokenizer> tokenizer, const EmbedderOptions& options);
  // Runs inputs [begin, end) (valid, fitting the workspace) as one batch into out.
  void run_batch(std::span<const std::vector<TokenId>> inputs, size_t begin, size_t end,
                 std::vector<std::vector<float>>& out);

  std::unique_ptr<GgufFile> file_;  // the weights point into its mapping
  std::unique_ptr<EncoderModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  ThreadPool pool_;
  EncoderWorkspace ws_;
  std::string rerank_prompt_;  // encoders pair their texts with separators, never a prompt
};

}  // namespace trellis
