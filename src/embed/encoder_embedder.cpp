#include "embed/encoder_embedder.h"

#include <algorithm>
#include <cmath>

namespace trellis {

Result<std::unique_ptr<Embedder>> EncoderEmbedder::open(std::unique_ptr<GgufFile> file,
                                                        std::unique_ptr<Tokenizer> tokenizer,
                                                        const EmbedderOptions& options) {
  Result<std::unique_ptr<EncoderModel>> model = EncoderModel::load(*file);
  if (!model.ok()) return model.error();
  if (tokenizer->vocab().size() != (*model)->hparams().n_vocab) {
    return Error{file->name() + ": the tokenizer's vocab does not match token_embd.weight"};
  }
  return std::unique_ptr<Embedder>(new EncoderEmbedder(std::move(file), std::move(model).value(),
                                                       std::move(tokenizer), options));
}

EncoderEmbedder::EncoderEmbedder(std::unique_ptr<GgufFile> file,
                                 std::unique_ptr<EncoderModel> model,
                                 std::unique_ptr<Tokenizer> tokenizer,
                                 const EmbedderOptions& options)
    : file_(std::move(file)),
      model_(std::move(model)),
      tokenizer_(std::move(tokenizer)),
      pool_(options.n_threads > 0 ? options.n_threads : ThreadPool::default_thread_count()),
      ws_(model_->hparams(),
          std::max<int32_t>(
              options.max_batch_tokens,
              static_cast<int32_t>(std::min(model_->hparams().n_ctx_train, kMaxEncoderContext))),
          pool_.size()) {}

Result<std::vector<std::vector<float>>> EncoderEmbedder::embed(
    std::span<const std::vector<TokenId>> inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    Status valid = check_input(inputs[i]);
    if (!valid.ok()) return Error{"input " + std::to_string(i) + " " + valid.error().message};
  }
  std::vector<std::vector<float>> out(inputs.size());
  // Inputs are taken in order, as many per batch as the workspace holds.
  size_t begin = 0;
  while (begin < inputs.size()) {
    size_t end = begin;
    int64_t rows = 0;
    while (end < inputs.size() &&
           (end == begin || rows + static_cast<int64_t>(inputs[end].size()) <= ws_.max_rows())) {
      rows += static_cast<int64_t>(inputs[end].size());
      ++end;
    }
    run_batch(inputs, begin, end, out);
    begin = end;
  }
  return out;
}

void EncoderEmbedder::run_batch(std::span<const std::vector<TokenId>> inputs, size_t begin,
                                size_t end, std::vector<std::vector<float>>& out) {
  std::vector<std::span<const TokenId>> batch;
  for (size_t i = begin; i < end; ++i) batch.emplace_back(inputs[i]);
  std::vector<float> pooled(batch.size() * static_cast<size_t>(n_out()));
  model_->encode(batch, ws_, pool_, pooled.data());
  for (size_t i = 0; i < batch.size(); ++i) {
    out[begin + i].assign(pooled.begin() + static_cast<ptrdiff_t>(i * n_out()),
                          pooled.begin() + static_cast<ptrdiff_t>((i + 1) * n_out()));
  }
}

}  // namespace trellis
