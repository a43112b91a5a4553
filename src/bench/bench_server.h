// An engine and the OpenAI server on it, on a free loopback port, serving on its own thread: what
// the HTTP benches (`trellis bench server`, `bench router`) send their requests to.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "base/result.h"
#include "engine/engine.h"
#include "server/http_server.h"

namespace trellis::bench {

class BenchServer {
 public:
  // Loads the model and starts serving. `chat_template` names the template to use when the file
  // declares none the server recognizes.
  static Result<std::unique_ptr<BenchServer>> start(const std::string& model_path,
                                                    const EngineConfig& engine_config,
                                                    const std::string& chat_template);
  // Stops the server and waits for its thread.
  ~BenchServer();
  BenchServer(const BenchServer&) = delete;
  BenchServer& operator=(const BenchServer&) = delete;

  int port() const { return server_->port(); }
  const Tokenizer& tokenizer() const { return engine_->tokenizer(); }

 private:
  BenchServer() = default;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
};

}  // namespace trellis::bench
