// The OpenAI-compatible API on top of the engine, without the HTTP transport: each endpoint takes
// the request body (and the caller's API key) and returns a status with a JSON body, or an event
// stream to be written by the transport (server/http_server.h). Keeping sockets out of this layer
// lets the tests drive every endpoint directly.
//
//   POST /v1/completions, /v1/chat/completions   generation (n > 1 through Engine::fork)
//   GET  /v1/models, /health, /metrics
//   POST /tokenize, /detokenize
//
// Generation requests are counted while they run (streams until their last event); above
// ServerConfig::max_concurrent_requests they get 429. After begin_shutdown() new ones get 503 and
// running ones are cancelled.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "engine/engine.h"
#include "server/api_error.h"
#include "server/client_presence.h"
#include "server/http_api.h"
#include "server/openai_protocol.h"
#include "server/openai_response.h"
#include "server/output_constraint.h"
#include "server/reply_memory.h"
#include "server/server_config.h"
#include "server/server_metrics.h"

namespace trellis {

enum class OpenAiEndpoint { HEALTH, METRICS, MODELS, COMPLETIONS, CHAT, TOKENIZE, DETOKENIZE };

class OpenAiService : public HttpApi {
 public:
  // The endpoints above, for the transport (ApiEndpoint::id is an OpenAiEndpoint).
  static std::span<const ApiEndpoint> endpoints();
  // `engine` must outlive the service.
  OpenAiService(Engine& engine, ServerConfig config);
  ~OpenAiService();

  // `client`: the caller's connection; when it leaves, the generation is cancelled (null: a caller
  // that stays).
  ApiResponse completions(std::string_view body, std::string_view api_key,
                          std::shared_ptr<ClientPresence> client = nullptr);
  ApiResponse chat_completions(std::string_view body, std::string_view api_key,
                               std::shared_ptr<ClientPresence> client = nullptr);
  ApiResponse models() const;
  ApiResponse tokenize(std::string_view body) const;
  ApiResponse detokenize(std::string_view body) const;
  ApiResponse metrics();

  ApiResponse serve(const ApiEndpoint& endpoint, std::string_view body, std::string_view api_key,
                    std::shared_ptr<ClientPresence> client) override;
  // Refuses new generation requests (503) and cancels the running ones.
  void begin_shutdown() override;
  int32_t n_in_flight() const override { return in_flight_.load(); }
  const ServerMetrics& server_metrics() const { return metrics_; }
  const ServerConfig& config() const { return config_; }
  // The chat format: ServerConfig::chat_template, else the one the model's
  // tokenizer.chat_template implements, else CHATML.
  ChatTemplateKind chat_template() const { return chat_template_; }
  // Why the format fell back to CHATML (the model has no tokenizer.chat_template, or one of no
  // known format), for the one warning the server prints at start-up; empty when it did not.
  const std::string& chat_template_warning() const { return chat_template_warning_; }

  static ApiResponse error_response(const ApiError& error);

 private:
  struct Generation;
  struct InFlight;
  class Stream;

  ApiResponse generate(ApiResult<Generation> generation, std::shared_ptr<ClientPresence> client);
  // A whole chat reply's text split into reasoning, content and tool calls (g.reply).
  static void split_reply(const Generation& g, ChoiceResult& choice);
  static std::string tool_call_id_prefix(const Generation& g, int32_t index);
  template <typename ParsedRequest>
  ApiResult<Generation> make_generation(const ParsedRequest& req, std::vector<TokenId> prompt,
                                        std::optional<int32_t> top_logprobs,
                                        int32_t default_max_tokens, std::string_view api_key);
  ApiResult<Generation> prepare_completion(std::string_view body, std::string_view api_key);
  ApiResult<Generation> prepare_chat(std::string_view body, std::string_view api_key);
  // `ns`: the request's cache namespace (remembered replies are looked up in it).
  ApiResult<std::vector<TokenId>> render_chat_prompt(const ChatCompletionRequest& request,
                                                     const std::string& ns) const;
  // An error when `n_bytes` of text cannot fit the context even at the most bytes per token:
  // checked before tokenizing, which costs time and memory in proportion to the text.
  std::optional<ApiError> refuse_oversized_text(size_t n_bytes, const char* param) const;
  Status check_model(const std::string& model) const;
  ApiResult<int32_t> max_tokens_for(int32_t n_prompt, std::optional<int32_t> requested,
                                    int32_t fallback) const;
  // Submits the generation's requests (one per choice); `events` report each choice's text and end.
  ApiResult<std::vector<RequestHandle>> start(Generation& generation, ForkEvents events);
  ApiResponse run_whole(Generation& generation, std::shared_ptr<InFlight> slot,
                        ClientPresence& client);
  ApiResponse run_stream(std::shared_ptr<Generation> generation, std::shared_ptr<InFlight> slot,
                         std::shared_ptr<ClientPresence> client);
  // The usage of a generation's choices (the prompt counted once: they share it).
  TokenUsage usage_of(const Generation& generation,
                      const std::vector<RequestOutput>& outputs) const;
  // The wire form (token texts) of the engine's log-probabilities.
  std::vector<LogprobEntry> logprob_entries(const std::vector<Logprobs>& logprobs) const;
  void finish_request(const Generation& generation, const std::vector<RequestOutput>& outputs,
                      int status);
  std::string next_id(const char* prefix);
  uint64_t next_seed();

  Engine& engine_;
  ServerConfig config_;
  bool has_disk_tier_ = false;  // usage then says how many cached tokens came from disk
  ProtocolLimits limits_;
  ChatTemplateKind chat_template_ = ChatTemplateKind::CHATML;
  std::vector<TokenId> chat_stop_tokens_;    // the template's end-of-turn tokens in this vocab
  std::vector<TokenId> chat_markup_tokens_;  // the markup its replies are split by (harmony)
  std::string chat_template_warning_;        // see chat_template_warning()
  std::unique_ptr<ConstraintCompiler> constraints_;  // compiled grammars, by source
  std::unique_ptr<ReplyMemory> replies_;             // recent replies' tokens (exact re-rendering)
  ServerMetrics metrics_;
  std::atomic<int32_t> in_flight_{0};
  std::atomic<bool> shutting_down_{false};
  std::atomic<uint64_t> counter_{0};
  uint64_t seed_base_ = 0;
  int64_t created_ = 0;  // Unix seconds when the service started (reported by /v1/models)
  // Handles of running requests, by request counter, so that shutdown can cancel them.
  std::mutex active_mutex_;
  std::unordered_map<uint64_t, std::vector<RequestHandle>> active_;
};

}  // namespace trellis
