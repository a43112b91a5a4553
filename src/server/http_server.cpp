#include "server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <string>

#include "server/auth.h"

namespace trellis {
namespace {

// Worker threads beyond the generation slots, so /health and /metrics answer under full load and
// the request over the limit still gets its 429.
constexpr int32_t kSpareThreads = 16;

void set_json(httplib::Response& res, const ApiResponse& api) {
  res.status = api.status;
  res.set_content(api.body, api.content_type.c_str());
}

void set_error(httplib::Response& res, const ApiError& error) {
  set_json(res, OpenAiService::error_response(error));
}

// Connections the kernel queues before accept(). The library listens with a backlog of 5, too
// few for a burst of clients connecting at once (the surplus connections then fail), so the
// server raises it after binding.
constexpr int kListenBacklog = 1024;

// Hands a service response to httplib: a whole body, or a stream written as the events come.
void set_response(httplib::Response& res, ApiResponse api) {
  if (!api.stream) {
    set_json(res, api);
    return;
  }
  res.status = api.status;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  auto stream = std::make_shared<std::function<void(const StreamWriter&)>>(std::move(api.stream));
  auto ran = std::make_shared<bool>(false);
  res.set_chunked_content_provider(
      api.content_type.c_str(),
      [stream, ran](size_t /*offset*/, httplib::DataSink& sink) {
        *ran = true;
        (*stream)([&sink](std::string_view data) { return sink.write(data.data(), data.size()); });
        sink.done();
        return true;
      },
      [stream, ran](bool /*success*/) {
        // The client left before the stream began: run it against a closed writer, which cancels
        // its requests and releases their blocks.
        if (!*ran) (*stream)([](std::string_view) { return false; });
      });
}

}  // namespace

// httplib::Server with access to its listening socket (to raise the backlog).
class HttpServer::Transport : public httplib::Server {
 public:
  bool raise_backlog(int backlog) { return ::listen(svr_sock_, backlog) == 0; }
};

HttpServer::HttpServer(ServerConfig config)
    : config_(std::move(config)), http_(std::make_unique<Transport>()) {
  const auto n_threads = static_cast<size_t>(config_.max_concurrent_requests + kSpareThreads);
  http_->new_task_queue = [n_threads] { return new httplib::ThreadPool(n_threads); };
  http_->set_payload_max_length(config_.max_body_bytes);
  http_->set_keep_alive_timeout(2);
  add_routes();
}

HttpServer::~HttpServer() {
  shutdown();
}

Status HttpServer::bind() {
  if (config_.port == 0) {
    port_ = http_->bind_to_any_port(config_.host);
    if (port_ < 0) return Error{"cannot listen on " + config_.host + " (any port)"};
  } else {
    if (!http_->bind_to_port(config_.host, config_.port))
      return Error{"cannot listen on " + config_.host + ":" + std::to_string(config_.port) +
                   " (in use, or not an address of this machine)"};
    port_ = config_.port;
  }
  if (!http_->raise_backlog(kListenBacklog)) return Error{"cannot listen on the bound socket"};
  return {};
}

void HttpServer::serve() {
  http_->listen_after_bind();
}

void HttpServer::set_engine(Engine& engine) {
  service_ = std::make_unique<OpenAiService>(engine, config_);
  ready_ = true;
}

void HttpServer::shutdown() {
  if (ready_) service_->begin_shutdown();
  http_->stop();
}

void HttpServer::add_routes() {
  // Every failure httplib itself detects (unknown route, body too large, bad request line) gets
  // the OpenAI error shape too.
  http_->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a handler's own error
    if (res.status == 404) {
      set_error(res, not_found_error("no route " + req.method + " " + req.path));
    } else if (res.status == 413) {
      set_error(res,
                ApiError{413, "the request body is larger than the server accepts (--max-body)",
                         ApiErrorType::INVALID_REQUEST, std::nullopt, std::nullopt});
    } else {
      const int status = res.status;
      set_error(res, ApiError{status, "HTTP error " + std::to_string(status),
                              status >= 500 ? ApiErrorType::SERVER : ApiErrorType::INVALID_REQUEST,
                              std::nullopt, std::nullopt});
    }
  });
  http_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        set_error(res, server_error("internal error"));
      });

  // The API key the caller presented (checked when keys are configured); nullopt after writing
  // the 401 or 503 that ends the request.
  auto admit = [this](const httplib::Request& req,
                      httplib::Response& res) -> std::optional<std::string> {
    std::optional<std::string> token;
    if (req.has_header("Authorization"))
      token = bearer_token(req.get_header_value("Authorization"));
    if (!config_.api_keys.empty()) {
      if (!token) {
        set_error(res, authentication_error(
                           "missing API key: send the header Authorization: Bearer <key>"));
        return std::nullopt;
      }
      if (!api_key_accepted(config_.api_keys, *token)) {
        set_error(res, authentication_error("incorrect API key provided"));
        return std::nullopt;
      }
    }
    if (!ready_) {
      set_error(res, server_error("the model is still loading", 503));
      return std::nullopt;
    }
    return token.value_or("");
  };

  http_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    res.status = ready_ ? 200 : 503;
    res.set_content(ready_ ? R"({"status":"ok"})" : R"({"status":"loading"})", "application/json");
  });
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    if (!ready_) return set_error(res, server_error("the model is still loading", 503));
    set_json(res, service_->metrics());
  });
  http_->Get("/v1/models", [this, admit](const httplib::Request& req, httplib::Response& res) {
    if (admit(req, res)) set_json(res, service_->models());
  });
  http_->Post("/v1/completions",
              [this, admit](const httplib::Request& req, httplib::Response& res) {
                if (std::optional<std::string> key = admit(req, res))
                  set_response(res, service_->completions(req.body, *key));
              });
  http_->Post("/v1/chat/completions",
              [this, admit](const httplib::Request& req, httplib::Response& res) {
                if (std::optional<std::string> key = admit(req, res))
                  set_response(res, service_->chat_completions(req.body, *key));
              });
  http_->Post("/tokenize", [this, admit](const httplib::Request& req, httplib::Response& res) {
    if (admit(req, res)) set_json(res, service_->tokenize(req.body));
  });
  http_->Post("/detokenize", [this, admit](const httplib::Request& req, httplib::Response& res) {
    if (admit(req, res)) set_json(res, service_->detokenize(req.body));
  });
}

}  // namespace trellis
