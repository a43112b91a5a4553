#include "bench/bench_server.h"

#include "tokenizer/chat_template.h"

namespace trellis::bench {

Result<std::unique_ptr<BenchServer>> BenchServer::start(const std::string& model_path,
                                                        const EngineConfig& engine_config,
                                                        const std::string& chat_template) {
  std::unique_ptr<BenchServer> s(new BenchServer());
  Result<std::unique_ptr<Engine>> engine = Engine::create(model_path, engine_config);
  if (!engine.ok()) return engine.error();
  s->engine_ = std::move(engine).value();
  ServerConfig config;
  config.port = 0;
  config.model_id = "bench";
  config.log_requests = false;
  if (!detect_chat_template(s->engine_->file()).ok()) {
    Result<ChatTemplateKind> kind = parse_chat_template_name(chat_template);
    if (!kind.ok()) return kind.error();
    config.chat_template = *kind;
  }
  s->server_ = std::make_unique<HttpServer>(config);
  TRELLIS_TRY(s->server_->bind());
  s->thread_ = std::thread([server = s->server_.get()] { server->serve(); });
  s->server_->set_engine(*s->engine_);
  return s;
}

BenchServer::~BenchServer() {
  if (!thread_.joinable()) return;  // start failed before serving
  server_->shutdown();
  thread_.join();
}

}  // namespace trellis::bench
