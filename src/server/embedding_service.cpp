#include "server/embedding_service.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "server/metrics.h"
#include "server/openai_response.h"

namespace trellis {
namespace {

ApiResponse error_reply(const ApiError& error) {
  return ApiResponse{error.http_status, "application/json", error_json(error).dump(), {}};
}

ApiResponse json_reply(std::string body) {
  return ApiResponse{200, "application/json", std::move(body), {}};
}

int64_t count_tokens(const std::vector<std::vector<TokenId>>& inputs) {
  int64_t n = 0;
  for (const std::vector<TokenId>& input : inputs) n += static_cast<int64_t>(input.size());
  return n;
}

// Counts a request in flight for as long as it is served.
class InFlight {
 public:
  explicit InFlight(std::atomic<int32_t>& count) : count_(count) { ++count_; }
  ~InFlight() { --count_; }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::atomic<int32_t>& count_;
};

}  // namespace

std::span<const ApiEndpoint> EmbeddingService::endpoints() {
  using E = EmbeddingEndpoint;
  static constexpr ApiEndpoint kEndpoints[] = {
      {ApiMethod::GET, "/health", static_cast<int>(E::HEALTH), false, false, false},
      {ApiMethod::GET, "/metrics", static_cast<int>(E::METRICS), false, false, false},
      {ApiMethod::GET, "/v1/models", static_cast<int>(E::MODELS), true, false, false},
      {ApiMethod::POST, "/v1/embeddings", static_cast<int>(E::EMBEDDINGS), true, true, true},
      {ApiMethod::POST, "/v1/rerank", static_cast<int>(E::RERANK), true, true, true},
      {ApiMethod::POST, "/rerank", static_cast<int>(E::RERANK), true, true, true},
      {ApiMethod::POST, "/v2/rerank", static_cast<int>(E::RERANK), true, true, true},
  };
  return kEndpoints;
}

EmbeddingService::EmbeddingService(Embedder& embedder, ServerConfig config, int64_t batch_tokens)
    : embedder_(embedder),
      config_(std::move(config)),
      queue_(embedder, batch_tokens),
      created_(std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count()) {}

ApiResponse EmbeddingService::serve(const ApiEndpoint& endpoint, std::string_view body,
                                    std::string_view, std::shared_ptr<ClientPresence>) {
  switch (static_cast<EmbeddingEndpoint>(endpoint.id)) {
    case EmbeddingEndpoint::HEALTH:
      return json_reply(R"({"status":"ok"})");
    case EmbeddingEndpoint::METRICS:
      return metrics();
    case EmbeddingEndpoint::MODELS:
      return json_reply(models_list_json(config_.model_id, created_).dump());
    case EmbeddingEndpoint::EMBEDDINGS:
      return embeddings(body);
    case EmbeddingEndpoint::RERANK:
      return rerank(body);
  }
  return error_reply(not_found_error("no such endpoint"));
}

void EmbeddingService::begin_shutdown() {
  shutting_down_ = true;
  queue_.shutdown();
}

std::optional<ApiError> EmbeddingService::refuse(const std::string& model) const {
  if (shutting_down_) return server_error("the server is shutting down", 503);
  if (!model.empty() && model != config_.model_id) {
    return not_found_error(
        "The model `" + model + "` does not exist (this server serves `" + config_.model_id + "`)",
        "model_not_found");
  }
  return std::nullopt;
}

ApiResult<std::vector<TokenId>> EmbeddingService::fit(std::vector<TokenId> tokens, bool truncate,
                                                      const std::string& param) const {
  const auto n_ctx = static_cast<size_t>(embedder_.n_ctx());
  if (truncate && tokens.size() > n_ctx) {
    const TokenId last = tokens.back();  // the separator the tokenizer ends every input with
    tokens.resize(n_ctx);
    tokens.back() = last;
  }
  Status valid = embedder_.check_input(tokens);
  if (!valid.ok()) {
    std::string message = param + " " + valid.error().message;
    if (tokens.size() > n_ctx) message += " (send truncate: true to cut it)";
    return invalid_request_error(std::move(message), param);
  }
  return tokens;
}

ApiResult<std::vector<std::vector<float>>> EmbeddingService::run(
    std::vector<std::vector<TokenId>> inputs) {
  ++n_requests_;
  n_inputs_ += static_cast<int64_t>(inputs.size());
  n_tokens_ += count_tokens(inputs);
  Result<std::vector<std::vector<float>>> out = queue_.embed(std::move(inputs));
  if (!out.ok()) return server_error(out.error().message, 503);
  return std::move(out).value();
}

ApiResponse EmbeddingService::embeddings(std::string_view body) {
  InFlight counted(in_flight_);
  ApiResult<EmbeddingRequest> request =
      parse_embedding_request(body, /*max_json_depth=*/64, embedder_.n_vocab(), kMaxInputs);
  if (!request.ok()) return error_reply(request.error());
  if (std::optional<ApiError> refused = refuse(request->model)) return error_reply(*refused);
  if (embedder_.is_reranker()) {
    return error_reply(invalid_request_error(
        "this model is a reranker: send its query and documents to /v1/rerank", std::nullopt));
  }
  const int64_t n_embd = embedder_.n_out();
  if (request->dimensions && *request->dimensions > n_embd) {
    return error_reply(invalid_request_error(
        "dimensions must be at most the model's " + std::to_string(n_embd), "dimensions"));
  }
  std::vector<std::vector<TokenId>> inputs = std::move(request->token_inputs);
  for (const std::string& text : request->texts) {
    if (text.empty())
      inputs.emplace_back();  // refused below, by name
    else
      inputs.push_back(embedder_.tokenize(text));
  }
  const bool one = inputs.size() == 1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string param = one ? "input" : "input[" + std::to_string(i) + "]";
    ApiResult<std::vector<TokenId>> fitted = fit(std::move(inputs[i]), request->truncate, param);
    if (!fitted.ok()) return error_reply(fitted.error());
    inputs[i] = std::move(fitted).value();
  }
  const int64_t n_tokens = count_tokens(inputs);
  ApiResult<std::vector<std::vector<float>>> vectors = run(std::move(inputs));
  if (!vectors.ok()) return error_reply(vectors.error());
  for (std::vector<float>& v : *vectors) {
    if (request->dimensions) v.resize(static_cast<size_t>(*request->dimensions));
    normalize_l2(v);
  }
  return json_reply(embeddings_response(config_.model_id, *vectors, request->encoding, n_tokens));
}

ApiResponse EmbeddingService::rerank(std::string_view body) {
  InFlight counted(in_flight_);
  ApiResult<RerankRequest> request = parse_rerank_request(body, /*max_json_depth=*/64, kMaxInputs);
  if (!request.ok()) return error_reply(request.error());
  if (std::optional<ApiError> refused = refuse(request->model)) return error_reply(*refused);
  if (!embedder_.is_reranker()) {
    return error_reply(invalid_request_error(
        "this model embeds and does not rerank: send texts to /v1/embeddings", std::nullopt));
  }
  if (request->query.empty()) {
    return error_reply(invalid_request_error("query must not be empty", "query"));
  }
  std::vector<std::vector<TokenId>> inputs;
  for (size_t i = 0; i < request->documents.size(); ++i) {
    const std::string param = "documents[" + std::to_string(i) + "]";
    if (request->documents[i].empty()) {
      return error_reply(invalid_request_error(param + " must not be empty", param));
    }
    ApiResult<std::vector<TokenId>> fitted = fit(
        embedder_.tokenize_pair(request->query, request->documents[i]), request->truncate, param);
    if (!fitted.ok()) return error_reply(fitted.error());
    inputs.push_back(std::move(fitted).value());
  }
  const int64_t n_tokens = count_tokens(inputs);
  ApiResult<std::vector<std::vector<float>>> scores = run(std::move(inputs));
  if (!scores.ok()) return error_reply(scores.error());
  std::vector<RerankResult> results;
  for (size_t i = 0; i < scores->size(); ++i) {
    results.push_back({static_cast<int64_t>(i), (*scores)[i][0]});
  }
  std::stable_sort(results.begin(), results.end(),
                   [](const RerankResult& a, const RerankResult& b) {
                     return a.relevance_score > b.relevance_score;
                   });
  if (request->top_n && static_cast<size_t>(*request->top_n) < results.size()) {
    results.resize(static_cast<size_t>(*request->top_n));
  }
  return json_reply(rerank_response(config_.model_id, *request, results, n_tokens));
}

ApiResponse EmbeddingService::metrics() const {
  MetricsWriter out;
  out.counter("embedding_requests_total", "Embedding and rerank requests served.",
              static_cast<double>(n_requests_.load()));
  out.counter("embedding_inputs_total", "Inputs (texts, documents) embedded or scored.",
              static_cast<double>(n_inputs_.load()));
  out.counter("embedding_tokens_total", "Tokens of those inputs.",
              static_cast<double>(n_tokens_.load()));
  out.counter("embedding_batches_total", "Forward passes the requests shared.",
              static_cast<double>(queue_.n_batches()));
  out.gauge("embedding_requests_running", "Requests being served now.",
            static_cast<double>(in_flight_.load()));
  return ApiResponse{200, "text/plain; version=0.0.4", out.text(), {}};
}

}  // namespace trellis
