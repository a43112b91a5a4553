// The HTTP client side of `trellis bench server`: one streaming OpenAI chat request over loopback,
// timed from sending to its first content chunk (TTFT) and to the end of the stream (latency).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "base/result.h"

namespace trellis::bench {

struct ChatFigures {
  double ttft_ms = 0;     // sending to the first chunk with non-empty content
  double latency_ms = 0;  // sending to the end of the response
  // From the final chunk's usage (0 when the server sent none).
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t completion_tokens = 0;
  std::string text;  // the concatenated content deltas
};

// The body of a greedy streaming chat request (system + user message, usage included), that
// generates exactly max_tokens tokens.
nlohmann::json chat_body(const std::string& system, const std::string& user, int32_t max_tokens);
// The same for a whole conversation (`messages`: [{"role", "content"}, ...]).
nlohmann::json conversation_body(nlohmann::json messages, int32_t max_tokens);

// POSTs `body` to http://127.0.0.1:<port>/v1/chat/completions and reads the server-sent events
// until the end. Errors name the HTTP status (with the body) or the transport failure.
Result<ChatFigures> chat_request(int port, const nlohmann::json& body);

}  // namespace trellis::bench
