// An embedding model or reranker ready to run: an encoder file (model/encoder_model.h) with its
// tokenizer, threads and activation buffers. embed() runs any number of inputs, in batches of at
// most max_batch_tokens tokens; one caller at a time (the server's EmbeddingQueue serializes).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/thread_pool.h"
#include "base/token_id.h"
#include "gguf/gguf_file.h"
#include "model/encoder_model.h"
#include "tokenizer/tokenizer.h"

namespace trellis {

struct EmbedderOptions {
  int n_threads = 0;                // 0: all cores
  int32_t max_batch_tokens = 4096;  // tokens run in one forward pass (at least the context)
};

class Embedder {
 public:
  // Opens `path`; errors name the file and the problem (not an encoder, a missing tensor, ...).
  static Result<std::unique_ptr<Embedder>> open(const std::string& path,
                                                const EmbedderOptions& options = {});

  const EncoderHParams& hparams() const { return model_->hparams(); }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  Pooling pooling() const { return hparams().pooling; }
  bool is_reranker() const { return pooling() == Pooling::RANK; }
  // Floats per output: the embedding's width, or a reranker's scores (1).
  int64_t n_out() const { return model_->n_out(); }
  int32_t n_ctx() const { return static_cast<int32_t>(hparams().n_ctx_train); }
  int n_threads() const { return pool_.size(); }

  // [CLS] text [SEP] (the tokenizer's special tokens), special tokens in the text not parsed.
  std::vector<TokenId> tokenize(std::string_view text) const;
  // A reranker's input: [CLS] query [SEP] document [SEP].
  std::vector<TokenId> tokenize_pair(std::string_view query, std::string_view document) const;

  // Whether one input may be embedded: 1 to n_ctx() tokens of the vocab; the error says what is
  // wrong ("is empty", "has 600 tokens, more than the model's context of 512").
  Status check_input(std::span<const TokenId> input) const { return model_->validate_input(input); }

  // The raw pooled output of each input (n_out() floats each, not normalized), or an error naming
  // the first bad input (empty, longer than the context, a token outside the vocab).
  Result<std::vector<std::vector<float>>> embed(std::span<const std::vector<TokenId>> inputs);

 private:
  Embedder(std::unique_ptr<GgufFile> file, std::unique_ptr<EncoderModel> model,
           std::unique_ptr<Tokenizer> tokenizer, const EmbedderOptions& options);
  // Runs inputs [begin, end) (valid, fitting the workspace) as one batch into out.
  void run_batch(std::span<const std::vector<TokenId>> inputs, size_t begin, size_t end,
                 std::vector<std::vector<float>>& out);

  std::unique_ptr<GgufFile> file_;  // the weights point into its mapping
  std::unique_ptr<EncoderModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  ThreadPool pool_;
  EncoderWorkspace ws_;
};

// Scales v to unit Euclidean length (a zero vector stays zero), in double.
void normalize_l2(std::span<float> v);

// Whether the file at `path` is an encoder (embedding model or reranker) rather than a decoder.
bool is_encoder_file(const GgufFile& file);

}  // namespace trellis
