// What the HTTP transport (server/http_server.h) serves: a table of endpoints and one function
// that answers them with a status and a body, or an event stream. The OpenAI API on an engine
// (server/openai_service.h) is one such API; the router in front of replicas (router/) another.
// The transport owns everything about sockets (limits, deadlines, keys checked before the body is
// read, clients that leave); the API owns what a request means.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "server/client_presence.h"

namespace trellis {

// Writes one piece of an event stream; false when the client is gone (then stop writing).
using StreamWriter = std::function<bool(std::string_view)>;

struct ApiResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // Set for a stream (then body is unused): run once by the transport with a writer for the
  // connection; returns when the stream ended or the client left.
  std::function<void(const StreamWriter&)> stream;
};

enum class ApiMethod { GET, POST };

struct ApiEndpoint {
  ApiMethod method = ApiMethod::GET;
  std::string_view path;
  int id = 0;               // the API's own name for it (what serve() switches on)
  bool needs_key = true;    // the bearer token is checked before the body is read
  bool on_worker = true;    // served on a worker thread (it may block), else on the I/O thread
  bool generation = false;  // counts against ServerConfig::max_concurrent_requests
};

class HttpApi {
 public:
  virtual ~HttpApi() = default;
  // `client`: the caller's connection; when it leaves, the work it started should stop.
  virtual ApiResponse serve(const ApiEndpoint& endpoint, std::string_view body,
                            std::string_view api_key, std::shared_ptr<ClientPresence> client) = 0;
  // Generation requests being served now.
  virtual int32_t n_in_flight() const = 0;
  // New generation requests get 503 and running ones end.
  virtual void begin_shutdown() = 0;
};

}  // namespace trellis
