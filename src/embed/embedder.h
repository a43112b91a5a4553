// An embedding model or reranker ready to run, behind one interface whatever its kind:
//   EncoderEmbedder  a BERT-style encoder (bert, nomic-bert): model/encoder_model.h
//   DecoderEmbedder  a decoder family with a pooling_type key (Qwen3-Embedding, Qwen3-Reranker):
//                    model/model.h's forward pass, the inputs of a call sharing their common
//                    prefix's KV (an instruction, a reranker's query) instead of each computing it
// embed() runs any number of inputs, in batches; one caller at a time (the server's
// EmbeddingQueue serializes).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/token_id.h"
#include "gguf/gguf_file.h"
#include "model/pooling.h"
#include "tokenizer/tokenizer.h"

namespace trellis {

struct EmbedderOptions {
  int n_threads = 0;                // 0: all cores
  int32_t max_batch_tokens = 4096;  // tokens run in one forward pass (at least the context)
};

class Embedder {
 public:
  virtual ~Embedder() = default;

  // Opens `path` as the kind of model it holds; errors name the file and the problem (a
  // generative model without a pooling_type, a missing tensor, ...).
  static Result<std::unique_ptr<Embedder>> open(const std::string& path,
                                                const EmbedderOptions& options = {});

  virtual Pooling pooling() const = 0;
  bool is_reranker() const { return pooling() == Pooling::RANK; }
  // Floats per output: the embedding's width, or a reranker's scores (the first is the
  // relevance).
  virtual int64_t n_out() const = 0;
  virtual int32_t n_ctx() const = 0;
  virtual int64_t n_vocab() const = 0;
  virtual int n_threads() const = 0;
  virtual const Tokenizer& tokenizer() const = 0;

  // The text with the tokenizer's special tokens ([CLS] text [SEP], BOS text, ...); special
  // tokens spelled in the text are not parsed.
  std::vector<TokenId> tokenize(std::string_view text) const;
  // A reranker's input for a query and a document: the file's rerank prompt filled in, or
  // else query, separator, document, separator ([CLS] query [SEP] document [SEP]).
  virtual std::vector<TokenId> tokenize_pair(std::string_view query,
                                             std::string_view document) const;

  // The file's tokenizer.chat_template.rerank ({query} and {document} stand for the texts), or
  // empty.
  virtual const std::string& rerank_prompt() const = 0;

  // Whether one input may be embedded: 1 to n_ctx() tokens of the vocab; the error says what is
  // wrong ("is empty", "has 600 tokens, more than the model's context of 512").
  virtual Status check_input(std::span<const TokenId> input) const = 0;

  // The raw output of each input (n_out() floats each; embeddings not normalized), or an error
  // naming the first bad input.
  virtual Result<std::vector<std::vector<float>>> embed(
      std::span<const std::vector<TokenId>> inputs) = 0;
};

// Scales v to unit Euclidean length (a zero vector stays zero), in double.
void normalize_l2(std::span<float> v);

// Whether the file is an embedding model or reranker (an encoder, or a decoder whose
// ARCH.pooling_type names a pooling) rather than a generative model.
bool is_embedding_file(const GgufFile& file);

}  // namespace trellis
