// The requests and replies of the embedding endpoints:
//   POST /v1/embeddings  (OpenAI's: input as a string, strings, token ids or arrays of them;
//                         encoding_format float or base64; dimensions; usage)
//   POST /v1/rerank      (the shape Jina, Cohere and llama.cpp's server share: query, documents,
//                         top_n, return_documents; results by falling relevance_score)
// A field outside these is refused by name, as every endpoint of the server does.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/token_id.h"
#include "server/api_error.h"

namespace trellis {

enum class EmbeddingEncoding { FLOAT, BASE64 };

struct EmbeddingRequest {
  std::string model;  // empty: the server's
  // The inputs: texts, or (when the client sent token ids) tokens, one entry per input.
  std::vector<std::string> texts;
  std::vector<std::vector<TokenId>> token_inputs;
  bool tokens_given = false;
  EmbeddingEncoding encoding = EmbeddingEncoding::FLOAT;
  std::optional<int64_t> dimensions;  // the first N values, renormalized (Matryoshka)
  bool truncate = false;              // inputs longer than the context: cut instead of a 400
};

struct RerankRequest {
  std::string model;
  std::string query;
  std::vector<std::string> documents;
  std::optional<int64_t> top_n;  // absent: every document
  bool return_documents = true;
  bool truncate = false;
};

// Limits: at most max_inputs inputs (documents); token ids within [0, n_vocab).
ApiResult<EmbeddingRequest> parse_embedding_request(std::string_view body, int32_t max_json_depth,
                                                    int64_t n_vocab, int64_t max_inputs);
ApiResult<RerankRequest> parse_rerank_request(std::string_view body, int32_t max_json_depth,
                                              int64_t max_inputs);

// {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [...] or
// "base64"}], "model": ..., "usage": {"prompt_tokens": n, "total_tokens": n}}.
std::string embeddings_response(const std::string& model,
                                const std::vector<std::vector<float>>& vectors,
                                EmbeddingEncoding encoding, int64_t n_prompt_tokens);

struct RerankResult {
  int64_t index = 0;
  float relevance_score = 0.0f;
};
// {"object": "list", "model": ..., "results": [{"index", "relevance_score"[, "document":
// {"text"}]}], "usage": {...}}; `results` already ordered and cut to top_n.
std::string rerank_response(const std::string& model, const RerankRequest& request,
                            std::span<const RerankResult> results, int64_t n_prompt_tokens);

// The little-endian bytes of the floats, base64 encoded (what OpenAI's clients decode).
std::string base64_floats(std::span<const float> values);

}  // namespace trellis
