// Embedder over an encoder file (bert, nomic-bert): model/encoder_model.h with its tokenizer,
// threads and activation buffers.
#pragma once

#include <algorithm>
#include <memory>
#include <string>

#include "base/thread_pool.h"
#include "embed/embedder.h"
#include "model/encoder_model.h"
#include "model/input_check.h"

namespace trellis {

class EncoderEmbedder : public Embedder {
 public:
  // Longer contexts than any encoder we know of (8192: nomic-embed with its long rope) are served
  // up to this: a file claiming more must not size the buffers.
  static constexpr int64_t kMaxEncoderContext = 8192;

  static Result<std::unique_ptr<Embedder>> open(std::unique_ptr<GgufFile> file,
                                                std::unique_ptr<Tokenizer> tokenizer,
                                                const EmbedderOptions& options);

  Pooling pooling() const override { return model_->hparams().pooling; }
  int64_t n_out() const override { return model_->n_out(); }
  // The model's context, up to kMaxEncoderContext (the workspace holds a whole input).
  int32_t n_ctx() const override {
    return static_cast<int32_t>(std::min(model_->hparams().n_ctx_train, kMaxEncoderContext));
  }
  int64_t n_vocab() const override { return model_->hparams().n_vocab; }
  int n_threads() const override { return pool_.size(); }
  const Tokenizer& tokenizer() const override { return *tokenizer_; }
  const std::string& rerank_prompt() const override { return rerank_prompt_; }
  Status check_input(std::span<const TokenId> input) const override {
    return check_input_tokens(input, n_ctx(), n_vocab());
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
