// The HTTP transport of an API (server/http_api.h; by default the OpenAI-compatible API on an
// engine), on Boost.Beast and Asio: one I/O thread runs every connection asynchronously (so slow
// or idle clients hold only their own socket, within the deadlines and limits of ServerConfig),
// routes and bearer-token checks happen before a body is read, and each API request that may
// block is served on a worker thread (a generation blocks it while it runs). JSON error bodies
// for every failure, Server-Sent Events for streams, and a /health that says "loading" until the
// API is handed over. A client that leaves cancels its request.
//
//   HttpServer server(config);
//   server.bind();                 // port 0 picks a free one: server.port()
//   std::thread t([&] { server.serve(); });
//   server.set_engine(engine);     // /health turns ready, the API answers
//   server.shutdown();             // refuses new requests, cancels running ones, stops serving
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <span>

#include "base/result.h"
#include "engine/engine.h"
#include "server/http_api.h"
#include "server/openai_service.h"
#include "server/server_config.h"

namespace trellis {

class HttpServer {
 public:
  // `endpoints`: the routes of the API that set_api() will hand over (known before it is, so that
  // requests get "loading" rather than 404 until then).
  explicit HttpServer(ServerConfig config,
                      std::span<const ApiEndpoint> endpoints = OpenAiService::endpoints());
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds config.host:config.port (never sharing the port with another process). Errors with the
  // address when it is taken or invalid.
  Status bind();
  int port() const { return port_; }
  // Serves until shutdown(); call from its own thread after bind().
  void serve();
  // Starts answering with `api` (which must outlive the server).
  void set_api(HttpApi& api);
  // Starts answering the OpenAI API with `engine` (which must outlive the server).
  void set_engine(Engine& engine);
  // New requests get 503, running ones are cancelled (streams end), connections close, then
  // serve() returns (at once if it has not started). Idempotent.
  void shutdown();
  // The API layer, once set_engine ran (else null).
  OpenAiService* service() { return service_.get(); }

 private:
  class Transport;

  ServerConfig config_;
  std::span<const ApiEndpoint> endpoints_;
  std::unique_ptr<OpenAiService> service_;  // set_engine's
  HttpApi* api_ = nullptr;
  std::atomic<bool> ready_{false};
  std::unique_ptr<Transport> transport_;
  int port_ = 0;
};

}  // namespace trellis
