#include "embed/embedder.h"

#include <cmath>

#include "embed/decoder_embedder.h"
#include "embed/encoder_embedder.h"
#include "model/encoder_hparams.h"
#include "tokenizer/vocab.h"

namespace trellis {
namespace {

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

}  // namespace

Result<std::unique_ptr<Embedder>> Embedder::open(const std::string& path,
                                                 const EmbedderOptions& options) {
  Result<GgufFile> opened = GgufFile::open(path);
  if (!opened.ok()) return opened.error();
  auto file = std::make_unique<GgufFile>(std::move(opened).value());
  Result<Vocab> vocab = load_vocab(*file);
  if (!vocab.ok()) return vocab.error();
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::create(std::move(vocab).value());
  if (!tokenizer.ok()) return tokenizer.error();
  Result<std::string> arch = file->get_string("general.architecture");
  if (!arch.ok()) return arch.error();
  if (find_encoder_family(*arch) != nullptr) {
    return EncoderEmbedder::open(std::move(file), std::move(tokenizer).value(), options);
  }
  return DecoderEmbedder::open(std::move(file), std::move(tokenizer).value(), options);
}

std::vector<TokenId> Embedder::tokenize(std::string_view text) const {
  return tokenizer().encode(text, /*add_special=*/true, /*parse_special=*/false);
}

std::vector<TokenId> Embedder::tokenize_pair(std::string_view query,
                                             std::string_view document) const {
  if (!rerank_prompt().empty()) {
    // The file's prompt, as llama.cpp fills it: no special tokens added, those it spells parsed.
    std::string prompt = rerank_prompt();
    replace_all(prompt, "{query}", query);
    replace_all(prompt, "{document}", document);
    return tokenizer().encode(prompt, /*add_special=*/false, /*parse_special=*/true);
  }
  std::vector<TokenId> tokens = tokenize(query);
  const std::vector<TokenId> doc = tokenizer().encode(document, false, false);
  tokens.insert(tokens.end(), doc.begin(), doc.end());
  const TokenId eos = tokenizer().vocab().eos_id;
  if (tokenizer().vocab().add_eos && eos != kNoToken) tokens.push_back(eos);
  return tokens;
}

void normalize_l2(std::span<float> v) {
  double sum = 0.0;
  for (float x : v) sum += static_cast<double>(x) * x;
  if (sum <= 0.0) return;
  const double inv = 1.0 / std::sqrt(sum);
  for (float& x : v) x = static_cast<float>(x * inv);
}

bool is_embedding_file(const GgufFile& file) {
  Result<std::string> arch = file.get_string("general.architecture");
  if (!arch.ok()) return false;
  if (find_encoder_family(*arch) != nullptr) return true;
  Result<int64_t> pooling = file.get_int_or(*arch + ".pooling_type", 0);
  return pooling.ok() && *pooling != 0;
}

}  // namespace trellis
