#include "server/http_server.h"

#include <future>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "server/auth.h"
#include "server/http_connection.h"
#include "server/static_site.h"
#include "server/worker_threads.h"

namespace trellis {
namespace {

// Connections the kernel queues before accept(), for bursts of clients connecting at once.
constexpr int kListenBacklog = 1024;
// Worker threads beyond the generation slots, for /tokenize and /detokenize under full load.
constexpr int32_t kSpareWorkers = 16;
// How long shutdown lets cancelled requests write their last events before closing connections.
constexpr auto kShutdownGrace = std::chrono::milliseconds(2000);
// After a failed accept (say, out of file descriptors), wait before trying again.
constexpr auto kAcceptRetry = std::chrono::milliseconds(50);

// The chat page's files ("/" and "/chat/<file>", server/static_site.h): open without a key
// (the page asks for one when the API wants it), served by the transport itself.
constexpr ApiEndpoint kChatPage{ApiMethod::GET, "", -1, false, false, false};

// Whether a request with `method` is served by an endpoint declared with `declared`: HEAD is
// served wherever GET is (the same headers, no body), as HTTP requires.
bool method_serves(ApiMethod declared, http::verb method) {
  if (declared == ApiMethod::POST) return method == http::verb::post;
  return method == http::verb::get || method == http::verb::head;
}

HttpResponse to_http(const ApiResponse& api) {
  return HttpResponse{api.status, api.content_type, api.body};
}

HttpResponse error_response(const ApiError& error) {
  return to_http(OpenAiService::error_response(error));
}

}  // namespace

// The accepting socket, the live connections and the worker threads; everything but shutdown()
// and the workers runs on the one thread inside serve().
class HttpServer::Transport : public HttpRequestHandler {
 public:
  explicit Transport(HttpServer& server) : server_(server), acceptor_(io_) {}

  Status bind(const ServerConfig& config, int& port);
  void serve();
  void shutdown();

  std::optional<HttpResponse> check_headers(const HttpRequest& request) override;
  void handle(const std::shared_ptr<HttpConnection>& connection, HttpRequest request) override;
  void closed(HttpConnection* connection) override { connections_.erase(connection); }
  bool reserve_memory(int64_t bytes) override {
    int64_t held = reserved_bytes_.load();
    do {
      if (held + bytes > server_.config_.max_request_memory) return false;
    } while (!reserved_bytes_.compare_exchange_weak(held, held + bytes));
    return true;
  }
  void release_memory(int64_t bytes) override { reserved_bytes_ -= bytes; }

 private:
  void accept();
  void on_accept(beast::error_code ec, net::ip::tcp::socket socket);
  // The endpoint serving `request`; nullptr with `allowed` listing the methods the path has
  // ("GET, HEAD", "POST"), empty for an unknown path.
  const ApiEndpoint* find_endpoint(const HttpRequest& request, std::string& allowed) const;
  void serve_elsewhere(const std::shared_ptr<HttpConnection>& connection,
                       const ApiEndpoint& endpoint, HttpRequest request);
  // Runs `function` on the I/O thread and returns its result (the I/O thread must be running).
  template <typename Function>
  auto run_on_io(Function function) {
    using Result = decltype(function());
    auto done = std::make_shared<std::promise<Result>>();
    std::future<Result> result = done->get_future();
    net::post(io_, [function = std::move(function), done]() mutable {
      if constexpr (std::is_void_v<Result>) {
        function();
        done->set_value();
      } else {
        done->set_value(function());
      }
    });
    return result.get();
  }

  HttpServer& server_;
  // Of config.max_request_memory, by the requests in flight. Declared before io_: connections
  // that io_'s pending handlers still own give their share back when io_ is destroyed.
  std::atomic<int64_t> reserved_bytes_{0};
  net::io_context io_{1};
  net::ip::tcp::acceptor acceptor_;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> keep_running_;
  std::unordered_set<HttpConnection*> connections_;
  WorkerThreads workers_;
  std::atomic<bool> stopped_{false};
  std::atomic<bool> io_running_{false};  // serve() runs the I/O thread (shutdown waits on it)
};

Status HttpServer::Transport::bind(const ServerConfig& config, int& port) {
  const std::string where = config.host + ":" + std::to_string(config.port);
  beast::error_code ec;
  net::ip::tcp::resolver resolver(io_);
  auto endpoints = resolver.resolve(config.host, std::to_string(config.port),
                                    net::ip::tcp::resolver::passive, ec);
  if (ec || endpoints.empty()) return Error{"cannot listen on " + where + ": " + ec.message()};
  const net::ip::tcp::endpoint endpoint = endpoints.begin()->endpoint();
  acceptor_.open(endpoint.protocol(), ec);
  // SO_REUSEADDR lets a restarted server bind while old connections linger in TIME_WAIT; it does
  // not let a second server share a port that is listening (SO_REUSEPORT would, and is not set).
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(kListenBacklog, ec);
  if (ec) {
    return Error{"cannot listen on " + where + ": " + ec.message() +
                 (ec == net::error::address_in_use ? " (another server has the port)" : "")};
  }
  port = acceptor_.local_endpoint().port();
  return {};
}

void HttpServer::Transport::serve() {
  if (stopped_) return;
  keep_running_.emplace(io_.get_executor());
  accept();
  io_running_ = true;
  io_.run();
}

void HttpServer::Transport::accept() {
  acceptor_.async_accept(io_, [this](beast::error_code ec, net::ip::tcp::socket socket) {
    on_accept(ec, std::move(socket));
  });
}

void HttpServer::Transport::on_accept(beast::error_code ec, net::ip::tcp::socket socket) {
  if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
  if (ec) {  // out of descriptors or memory: try again shortly instead of spinning
    auto timer = std::make_shared<net::steady_timer>(io_, kAcceptRetry);
    timer->async_wait([this, timer](beast::error_code) { accept(); });
    return;
  }
  if (static_cast<int32_t>(connections_.size()) >= server_.config_.max_connections) {
    // Best effort, without waiting: a refusal the client can read, then the socket closes.
    const std::string body =
        OpenAiService::error_response(server_error("too many connections; retry later", 503)).body;
    const std::string refusal =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    beast::error_code ignored;
    socket.non_blocking(true, ignored);
    socket.write_some(net::buffer(refusal), ignored);
    socket.close(ignored);
  } else {
    auto connection = std::make_shared<HttpConnection>(std::move(socket), server_.config_, *this);
    connections_.insert(connection.get());
    connection->start();
  }
  accept();
}

void HttpServer::Transport::shutdown() {
  if (stopped_.exchange(true)) return;
  net::post(io_, [this] {
    beast::error_code ignored;
    acceptor_.close(ignored);
  });
  if (io_running_) {
    // The service has cancelled what runs: the workers write their last events (a stream says
    // it was cancelled), then each connection closes once its response is out. A client that
    // does not read is not waited for long: closing its connection fails its writes.
    workers_.wait_idle_for(kShutdownGrace);
    run_on_io([this] {
      const std::vector<HttpConnection*> open(connections_.begin(), connections_.end());
      for (HttpConnection* connection : open) connection->close_when_done();
    });
    const auto deadline = std::chrono::steady_clock::now() + kShutdownGrace;
    while (std::chrono::steady_clock::now() < deadline &&
           !run_on_io([this] { return connections_.empty(); })) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    run_on_io([this] {
      const std::vector<HttpConnection*> open(connections_.begin(), connections_.end());
      for (HttpConnection* connection : open) connection->close();
    });
  }
  workers_.wait_idle();
  keep_running_.reset();
  io_.stop();
}

const ApiEndpoint* HttpServer::Transport::find_endpoint(const HttpRequest& request,
                                                        std::string& allowed) const {
  allowed.clear();
  auto allow = [&allowed](ApiMethod method) {
    const char* names = method == ApiMethod::GET ? "GET, HEAD" : "POST";
    if (allowed.find(names) != std::string::npos) return;
    if (!allowed.empty()) allowed += ", ";
    allowed += names;
  };
  if (server_.config_.chat_page && find_static_file(request.path)) {
    if (method_serves(ApiMethod::GET, request.method)) return &kChatPage;
    allow(ApiMethod::GET);
  }
  for (const ApiEndpoint& endpoint : server_.endpoints_) {
    if (endpoint.path != request.path) continue;
    if (method_serves(endpoint.method, request.method)) return &endpoint;
    allow(endpoint.method);
  }
  return nullptr;
}

std::optional<HttpResponse> HttpServer::Transport::check_headers(const HttpRequest& request) {
  std::string allowed;
  const ApiEndpoint* endpoint = find_endpoint(request, allowed);
  if (!endpoint) {
    if (!allowed.empty()) {
      HttpResponse refused = error_response(
          ApiError{405, "method not allowed on " + request.path + " (allowed: " + allowed + ")",
                   ApiErrorType::INVALID_REQUEST, std::nullopt, std::nullopt});
      refused.headers = "Allow: " + allowed + "\r\n";
      return refused;
    }
    return error_response(not_found_error(
        "no route " + std::string(http::to_string(request.method)) + " " + request.path));
  }
  if (!endpoint->needs_key) return std::nullopt;
  // The key is checked before the body is read: an unauthenticated client costs no memory.
  const ServerConfig& config = server_.config_;
  if (!config.api_keys.empty()) {
    const std::optional<std::string> token = bearer_token(request.authorization);
    if (!token) {
      return error_response(
          authentication_error("missing API key: send the header Authorization: Bearer <key>"));
    }
    if (!api_key_accepted(config.api_keys, *token))
      return error_response(authentication_error("incorrect API key provided"));
  }
  if (!server_.ready_) return error_response(server_error("the model is still loading", 503));
  if (endpoint->generation && server_.api_->n_in_flight() >= config.max_concurrent_requests) {
    return error_response(rate_limit_error(
        "too many concurrent requests (the server serves at most " +
        std::to_string(config.max_concurrent_requests) + " at once); retry later"));
  }
  return std::nullopt;
}

void HttpServer::Transport::handle(const std::shared_ptr<HttpConnection>& connection,
                                   HttpRequest request) {
  std::string allowed;
  const ApiEndpoint& endpoint = *find_endpoint(request, allowed);  // check_headers admitted it
  if (&endpoint == &kChatPage) {
    const StaticFile file = *find_static_file(request.path);
    return connection->reply(HttpResponse{200, std::string(file.content_type),
                                          std::string(file.bytes),
                                          std::string(static_file_headers())});
  }
  if (!server_.ready_) {
    // Only the open endpoints get here before the API is set.
    if (request.path == "/health") {
      return connection->reply(HttpResponse{503, "application/json", R"({"status":"loading"})"});
    }
    return connection->reply(error_response(server_error("the model is still loading", 503)));
  }
  if (endpoint.on_worker) return serve_elsewhere(connection, endpoint, std::move(request));
  const std::string key = bearer_token(request.authorization).value_or("");
  connection->reply(to_http(server_.api_->serve(endpoint, request.body, key, nullptr)));
}

void HttpServer::Transport::serve_elsewhere(const std::shared_ptr<HttpConnection>& connection,
                                            const ApiEndpoint& endpoint, HttpRequest request) {
  const int32_t max_workers = server_.config_.max_concurrent_requests + kSpareWorkers;
  if (stopped_ || workers_.running() >= max_workers) {
    return connection->reply(error_response(server_error("the server is busy; retry later", 503)));
  }
  std::shared_ptr<ClientPresence> presence = connection->serve_elsewhere();
  HttpApi& api = *server_.api_;
  auto work = [&api, &endpoint, connection, presence, request = std::move(request)] {
    const std::string key = bearer_token(request.authorization).value_or("");
    ApiResponse response = api.serve(endpoint, request.body, key, presence);
    if (!response.stream) return connection->finish_elsewhere(to_http(response));
    response.stream(
        [&connection](std::string_view data) { return connection->write_stream(data); });
    connection->end_stream();
  };
  if (!workers_.launch(std::move(work))) {
    connection->finish_elsewhere(
        error_response(server_error("the server is busy; retry later", 503)));
  }
}

HttpServer::HttpServer(ServerConfig config, std::span<const ApiEndpoint> endpoints)
    : config_(std::move(config)),
      endpoints_(endpoints),
      transport_(std::make_unique<Transport>(*this)) {}

HttpServer::~HttpServer() {
  shutdown();
}

Status HttpServer::bind() {
  return transport_->bind(config_, port_);
}

void HttpServer::serve() {
  transport_->serve();
}

void HttpServer::set_api(HttpApi& api) {
  api_ = &api;
  ready_ = true;
}

void HttpServer::set_engine(Engine& engine) {
  service_ = std::make_unique<OpenAiService>(engine, config_);
  set_api(*service_);
}

void HttpServer::shutdown() {
  if (ready_) api_->begin_shutdown();
  transport_->shutdown();
}

}  // namespace trellis
