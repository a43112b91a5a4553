// What `trellis serve` is configured with: where to listen, who may call, how far the prefix cache
// is shared, and the limits that turn excess into clear errors instead of exhaustion.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "grammar/json_schema_grammar.h"
#include "tokenizer/chat_template.h"

namespace trellis {

// How requests' prefix-cache namespaces are derived (see cache_namespace_for in auth.h).
enum class CacheIsolation {
  NONE,  // every client shares one cache (cache_salt still narrows sharing)
  KEY,   // each API key has its own namespace; clients cannot reach another key's entries
};

// See ServerConfig::max_request_memory.
constexpr int64_t kRequestMemoryPerBodyByte = 4;

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (tests)
  // The model name served by /v1/models and accepted in requests' "model" field.
  std::string model_id;
  // Accepted bearer tokens; empty: no authentication.
  std::vector<std::string> api_keys;
  CacheIsolation cache_isolation = CacheIsolation::NONE;
  // Chat format; nullopt: detected from the model's tokenizer.chat_template, ChatML when the model
  // has none or one of no known format (OpenAiService::chat_template_warning() says why).
  std::optional<ChatTemplateKind> chat_template;
  // Larger request bodies get 413 (chunked ones too), before the body is read.
  size_t max_body_bytes = 4u << 20;
  // The memory that requests being read and served may hold together, estimated from their
  // bodies (kRequestMemoryPerBodyByte per byte: the body, its parsed JSON, the request's copies
  // of its text); a request that would pass it gets 503 before its body is read. Prompts too long
  // for the context are refused before they are tokenized, so tokenizing costs no more.
  int64_t max_request_memory = int64_t{1} << 30;
  // The request line and headers: more bytes or more fields get 431.
  size_t max_header_bytes = 16u << 10;
  int32_t max_header_count = 100;
  // Connections open at once; more are refused (503, closed) when accepted.
  int32_t max_connections = 1024;
  // A request's headers and body must arrive within this time of its first byte; a slower
  // client is dropped (slow clients never hold anything but their own socket).
  std::chrono::milliseconds request_timeout{10000};
  // A kept-alive connection waits this long for its next request.
  std::chrono::milliseconds idle_timeout{5000};
  // A client that stops reading its response for this long is dropped.
  std::chrono::milliseconds write_timeout{30000};
  // Generation requests served at once (streaming or not, queued in the engine or running); one
  // more gets 429.
  int32_t max_concurrent_requests = 256;
  // One line per request on stderr.
  bool log_requests = true;
  // GET / serves the chat page (server/static_site.h).
  bool chat_page = true;
  // Constrained outputs: the whitespace of JSON the schemas produce, and the bounds on compiling
  // a schema or grammar (past them the request gets 400).
  JsonGrammarOptions json_grammar;
  // A Qwen3 reply's <think> block goes to reasoning_content (false: it stays in the content).
  bool separate_reasoning = true;
};

}  // namespace trellis
