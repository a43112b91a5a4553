#include "embed/embedder.h"

#include <algorithm>
#include <cmath>

#include "tokenizer/vocab.h"

namespace trellis {

Result<std::unique_ptr<Embedder>> Embedder::open(const std::string& path,
                                                 const EmbedderOptions& options) {
  Result<GgufFile> opened = GgufFile::open(path);
  if (!opened.ok()) return opened.error();
  auto file = std::make_unique<GgufFile>(std::move(opened).value());
  Result<std::unique_ptr<EncoderModel>> model = EncoderModel::load(*file);
  if (!model.ok()) return model.error();
  Result<Vocab> vocab = load_vocab(*file);
  if (!vocab.ok()) return vocab.error();
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::create(std::move(vocab).value());
  if (!tokenizer.ok()) return tokenizer.error();
  if ((*tokenizer)->vocab().size() != (*model)->hparams().n_vocab) {
    return Error{path + ": the tokenizer's vocab does not match token_embd.weight"};
  }
  return std::unique_ptr<Embedder>(new Embedder(std::move(file), std::move(model).value(),
                                                std::move(tokenizer).value(), options));
}

Embedder::Embedder(std::unique_ptr<GgufFile> file, std::unique_ptr<EncoderModel> model,
                   std::unique_ptr<Tokenizer> tokenizer, const EmbedderOptions& options)
    : file_(std::move(file)),
      model_(std::move(model)),
      tokenizer_(std::move(tokenizer)),
      pool_(options.n_threads > 0 ? options.n_threads : ThreadPool::default_thread_count()),
      ws_(model_->hparams(),
          std::max<int32_t>(options.max_batch_tokens,
                            static_cast<int32_t>(model_->hparams().n_ctx_train)),
          pool_.size()) {}

std::vector<TokenId> Embedder::tokenize(std::string_view text) const {
  return tokenizer_->encode(text, /*add_special=*/true, /*parse_special=*/false);
}

std::vector<TokenId> Embedder::tokenize_pair(std::string_view query,
                                             std::string_view document) const {
  std::vector<TokenId> tokens = tokenize(query);
  const std::vector<TokenId> doc = tokenizer_->encode(document, false, false);
  tokens.insert(tokens.end(), doc.begin(), doc.end());
  const TokenId eos = tokenizer_->vocab().eos_id;
  if (tokenizer_->vocab().add_eos && eos != kNoToken) tokens.push_back(eos);
  return tokens;
}

Result<std::vector<std::vector<float>>> Embedder::embed(
    std::span<const std::vector<TokenId>> inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    Status valid = model_->validate_input(inputs[i]);
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

void Embedder::run_batch(std::span<const std::vector<TokenId>> inputs, size_t begin, size_t end,
                         std::vector<std::vector<float>>& out) {
  std::vector<std::span<const TokenId>> batch;
  for (size_t i = begin; i < end; ++i) batch.emplace_back(inputs[i]);
  std::vector<float> pooled(batch.size() * static_cast<size_t>(n_out()));
  model_->encode(batch, ws_, pool_, pooled.data());
  for (size_t i = 0; i < batch.size(); ++i) {
    out[begin + i].assign(pooled.begin() + static_cast<ptrdiff_t>(i * n_out()),
                          pooled.begin() + static_cast<ptrdiff_t>((i + 1) * n_out()));
  }
}

void normalize_l2(std::span<float> v) {
  double sum = 0.0;
  for (float x : v) sum += static_cast<double>(x) * x;
  if (sum <= 0.0) return;
  const double inv = 1.0 / std::sqrt(sum);
  for (float& x : v) x = static_cast<float>(x * inv);
}

bool is_encoder_file(const GgufFile& file) {
  Result<std::string> arch = file.get_string("general.architecture");
  return arch.ok() && find_encoder_family(*arch) != nullptr;
}

}  // namespace trellis
