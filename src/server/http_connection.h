// One client connection of the HTTP server (Boost.Beast on Asio), driven by the server's single
// I/O thread. It reads one request at a time within the limits and deadlines of ServerConfig
// (header bytes and fields, body bytes whether chunked or not, the time to receive the request,
// the keep-alive idle time), hands each request to the server, and writes the responses in order,
// so pipelined requests are answered one after the other.
//
// A request the server answers on another thread (serve_elsewhere) keeps the connection watched:
// a reset cancels the request through its ClientPresence; an end of stream may be a client that
// half-closed after sending its request, or one that left, which only writing tells apart, so a
// whole response still being computed gets its head (200, chunked) and then a space every
// kProbeInterval (JSON allows leading whitespace) until it is ready or a write fails; an event
// stream, even one whose request is still queued, gets a comment line instead.
#pragma once

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "server/client_presence.h"
#include "server/server_config.h"

namespace trellis {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

struct HttpRequest {
  http::verb method = http::verb::unknown;
  // The target's path, without its query string; an absolute-form target
  // (`GET http://host/v1/models`) is reduced to its path.
  std::string path;
  std::string authorization;
  std::string body;  // empty until the body is read
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::string headers{};  // more header lines, each ending "\r\n" (empty for the API's answers)
};

class HttpConnection;

// What the server does with what a connection reads; called on the I/O thread.
class HttpRequestHandler {
 public:
  virtual ~HttpRequestHandler() = default;
  // After the headers, before the body is read: a response (unknown route, missing key, not
  // ready) answers the request without reading its body, and the connection then closes.
  virtual std::optional<HttpResponse> check_headers(const HttpRequest& request) = 0;
  // A whole request: answered through connection.reply() now, or from another thread after
  // connection.serve_elsewhere().
  virtual void handle(const std::shared_ptr<HttpConnection>& connection, HttpRequest request) = 0;
  virtual void closed(HttpConnection* connection) = 0;
  // Reserves `bytes` of the memory budget for a request about to be read (false: refused), on
  // the I/O thread; release_memory() gives them back, from any thread, once its response is out
  // or nothing holds the connection any more.
  virtual bool reserve_memory(int64_t bytes) = 0;
  virtual void release_memory(int64_t bytes) = 0;
};

class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  HttpConnection(net::ip::tcp::socket socket, const ServerConfig& config,
                 HttpRequestHandler& handler);
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // I/O thread.
  void start();
  void close();  // idempotent; a request served elsewhere sees its client leave
  // Closes now when no response is under way, else once it has been written.
  void close_when_done();
  void reply(HttpResponse response);
  std::shared_ptr<ClientPresence> serve_elsewhere();

  // From the thread serving the request elsewhere.
  void finish_elsewhere(HttpResponse response);
  // Writes one piece of an event stream (the response head before the first) and waits until it
  // is written; false when the client is gone.
  bool write_stream(std::string_view data);
  void end_stream();

 private:
  struct Piece {
    std::string bytes;
    bool ends_response = false;
    std::function<void(bool)> written;  // called with whether the write succeeded
    // Written while the request is still being read (100 Continue): the request's deadline,
    // which covers this write, stays as it is.
    bool interim = false;
  };

  void wait_for_request();
  void read_header();
  void on_header(beast::error_code ec);
  void on_body(beast::error_code ec);
  void on_read_error(beast::error_code ec);
  void reply_and_close(int status, const std::string& message);
  void watch();
  void on_watch(beast::error_code ec, size_t n);
  void probe();
  void deliver(HttpResponse response);
  void queue(Piece piece);
  void write_next();
  void after_response();
  void release_reservation();
  std::string stream_head();

  beast::tcp_stream stream_;
  const ServerConfig& config_;
  HttpRequestHandler& handler_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpRequest request_;
  net::steady_timer timer_;  // the keep-alive wait, then the probes of a request served elsewhere
  std::deque<Piece> outbox_;
  std::shared_ptr<ClientPresence> presence_;
  int64_t reserved_bytes_ = 0;  // of the handler's memory budget, for the request being served
  bool keep_alive_ = true;
  bool head_only_ = false;  // the request being answered is a HEAD: its response has no body
  bool serving_elsewhere_ = false;
  bool head_sent_ = false;         // of the response being written
  bool stream_head_sent_ = false;  // ... and it is an event stream's
  bool watching_ = false;
  bool resume_after_watch_ = false;
  bool peer_eof_ = false;
  bool writing_ = false;
  bool closed_ = false;
};

}  // namespace trellis
