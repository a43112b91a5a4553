// The HTTP API of an embedding model or reranker (an encoder file; embed/embedder.h): what
// `trellis serve` answers with when its model embeds instead of generating.
//
//   GET  /health, /v1/models, /metrics
//   POST /v1/embeddings              (embedding models)
//   POST /v1/rerank, /rerank, /v2/rerank   (rerankers)
//
// Requests are checked whole (fields, lengths, the model) before any input runs; concurrent
// requests share forward passes through one EmbeddingQueue.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "embed/embedder.h"
#include "embed/embedding_queue.h"
#include "server/api_error.h"
#include "server/embedding_protocol.h"
#include "server/http_api.h"
#include "server/server_config.h"

namespace trellis {

enum class EmbeddingEndpoint { HEALTH, METRICS, MODELS, EMBEDDINGS, RERANK };

class EmbeddingService : public HttpApi {
 public:
  static std::span<const ApiEndpoint> endpoints();

  // `batch_tokens`: how many tokens of waiting requests one forward pass gathers.
  EmbeddingService(Embedder& embedder, ServerConfig config, int64_t batch_tokens);

  ApiResponse embeddings(std::string_view body);
  ApiResponse rerank(std::string_view body);

  ApiResponse serve(const ApiEndpoint& endpoint, std::string_view body, std::string_view api_key,
                    std::shared_ptr<ClientPresence> client) override;
  int32_t n_in_flight() const override { return in_flight_.load(); }
  void begin_shutdown() override;

  // The most inputs (or documents) one request may hold.
  static constexpr int64_t kMaxInputs = 4096;

 private:
  // The checks every request passes first: not shutting down, the model is this one.
  std::optional<ApiError> refuse(const std::string& model) const;
  // An input's tokens made to fit the context: cut (keeping the final separator) when `truncate`,
  // else a 400 naming `param`; an empty input is a 400 too.
  ApiResult<std::vector<TokenId>> fit(std::vector<TokenId> tokens, bool truncate,
                                      const std::string& param) const;
  ApiResult<std::vector<std::vector<float>>> run(std::vector<std::vector<TokenId>> inputs);
  ApiResponse metrics() const;

  Embedder& embedder_;
  ServerConfig config_;
  EmbeddingQueue queue_;
  int64_t created_ = 0;
  std::atomic<bool> shutting_down_{false};
  std::atomic<int32_t> in_flight_{0};
  std::atomic<int64_t> n_requests_{0};
  std::atomic<int64_t> n_inputs_{0};
  std::atomic<int64_t> n_tokens_{0};
};

}  // namespace trellis
