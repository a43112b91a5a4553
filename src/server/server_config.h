// What `trellis serve` is configured with: where to listen, who may call, how far the prefix cache
// is shared, and the limits that turn excess into clear errors instead of exhaustion.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/chat_template.h"

namespace trellis {

// How requests' prefix-cache namespaces are derived (see cache_namespace_for in auth.h).
enum class CacheIsolation {
  NONE,  // every client shares one cache (cache_salt still narrows sharing)
  KEY,   // each API key has its own namespace; clients cannot reach another key's entries
};

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (tests)
  // The model name served by /v1/models and accepted in requests' "model" field.
  std::string model_id;
  // Accepted bearer tokens; empty: no authentication.
  std::vector<std::string> api_keys;
  CacheIsolation cache_isolation = CacheIsolation::NONE;
  // Chat format; nullopt: detected from the model's tokenizer.chat_template.
  std::optional<ChatTemplateKind> chat_template;
  // Larger request bodies get 413.
  size_t max_body_bytes = 4u << 20;
  // Generation requests served at once (streaming or not, queued in the engine or running); one
  // more gets 429.
  int32_t max_concurrent_requests = 256;
  // One line per request on stderr.
  bool log_requests = true;
};

}  // namespace trellis
