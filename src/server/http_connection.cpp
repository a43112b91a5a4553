#include "server/http_connection.h"

#include <boost/beast/core/string.hpp>
#include <future>
#include <utility>

#include "server/api_error.h"

namespace trellis {
namespace {

constexpr auto kProbeInterval = std::chrono::milliseconds(250);
constexpr size_t kWatchReadBytes = 4096;
constexpr std::string_view kLastChunk = "0\r\n\r\n";
// An event-stream comment (ignored by clients) written to learn whether a client is still there.
constexpr std::string_view kProbeComment = ":\n\n";

std::string reason(int status) {
  const auto text = http::obsolete_reason(static_cast<http::status>(status));
  return text.empty() || text == "<unknown-status>" ? std::string("Status")
                                                    : std::string(text.data(), text.size());
}

// The status line and headers; content_length nullopt: a chunked body. `extra_headers`: whole
// header lines, each ending "\r\n".
std::string response_head(int status, std::string_view content_type, bool keep_alive,
                          std::optional<size_t> content_length,
                          std::string_view extra_headers = {}) {
  std::string head = "HTTP/1.1 " + std::to_string(status) + " " + reason(status) + "\r\n";
  head += "Content-Type: " + std::string(content_type) + "\r\n";
  head += extra_headers;
  if (content_length) {
    head += "Content-Length: " + std::to_string(*content_length) + "\r\n";
  } else {
    head += "Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\n";
  }
  head += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return head;
}

// `head_only`: the answer to a HEAD request, the headers a GET would get without the body.
std::string whole_response(const HttpResponse& r, bool keep_alive, bool head_only) {
  std::string out = response_head(r.status, r.content_type, keep_alive, r.body.size(), r.headers);
  if (!head_only) out += r.body;
  return out;
}

// The path of a request target: origin form ("/v1/models?x") or absolute form
// ("http://host:8080/v1/models?x", which HTTP/1.1 servers must accept); without the query.
std::string target_path(std::string_view target) {
  const size_t scheme_end = target.find("://");
  if (!target.empty() && target.front() != '/' && scheme_end != std::string_view::npos) {
    const size_t path_start = target.find('/', scheme_end + 3);
    target =
        path_start == std::string_view::npos ? std::string_view("/") : target.substr(path_start);
  }
  return std::string(target.substr(0, target.find_first_of("?#")));
}

// The transfer codings of a request body other than `chunked` (the only one the server decodes),
// as the client listed them; empty when there are none.
std::string unsupported_transfer_codings(std::string_view header) {
  std::string unsupported;
  while (!header.empty()) {
    const size_t comma = header.find(',');
    std::string_view coding = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    while (!coding.empty() && (coding.front() == ' ' || coding.front() == '\t'))
      coding.remove_prefix(1);
    while (!coding.empty() && (coding.back() == ' ' || coding.back() == '\t'))
      coding.remove_suffix(1);
    if (coding.empty() || beast::iequals(coding, "chunked")) continue;
    if (!unsupported.empty()) unsupported += ", ";
    unsupported += coding;
  }
  return unsupported;
}

// One chunk of a chunked body; `data` must not be empty (an empty chunk ends the body).
std::string chunk(std::string_view data) {
  char size[20];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string out(size, static_cast<size_t>(n));
  out.append(data);
  out += "\r\n";
  return out;
}

std::string error_body(int status, const std::string& message) {
  const ApiErrorType type = status >= 500 ? ApiErrorType::SERVER : ApiErrorType::INVALID_REQUEST;
  return error_json(ApiError{status, message, type, std::nullopt, std::nullopt}).dump();
}

}  // namespace

HttpConnection::HttpConnection(net::ip::tcp::socket socket, const ServerConfig& config,
                               HttpRequestHandler& handler)
    : stream_(std::move(socket)),
      config_(config),
      handler_(handler),
      buffer_(config.max_header_bytes + config.max_body_bytes + kWatchReadBytes),
      timer_(stream_.get_executor()) {}

// The last owner may be a worker that served the request after the client left: the memory
// budget is given back once nothing of the request is held any more.
HttpConnection::~HttpConnection() {
  release_reservation();
}

void HttpConnection::start() {
  beast::error_code ec;
  stream_.socket().set_option(net::ip::tcp::no_delay(true), ec);  // stream pieces go out at once
  wait_for_request();
}

// Between requests: pipelined bytes already buffered are parsed at once; otherwise the
// connection may stay idle for idle_timeout before the next request begins.
void HttpConnection::wait_for_request() {
  if (closed_) return;
  if (buffer_.size() > 0) return read_header();
  if (peer_eof_) return close();
  timer_.expires_after(config_.idle_timeout);
  timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec) self->close();  // idle too long
  });
  stream_.socket().async_wait(net::socket_base::wait_read,
                              [self = shared_from_this()](beast::error_code ec) {
                                self->timer_.cancel();
                                if (ec) return self->close();
                                self->read_header();
                              });
}

void HttpConnection::read_header() {
  if (closed_) return;
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(config_.max_header_bytes));
  parser_->body_limit(config_.max_body_bytes);
  request_ = HttpRequest{};
  // One deadline for the headers and the body together: a slow client cannot stretch it.
  stream_.expires_after(config_.request_timeout);
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
}

void HttpConnection::on_header(beast::error_code ec) {
  if (ec) return on_read_error(ec);
  const auto& header = parser_->get();
  const auto n_fields = std::distance(header.begin(), header.end());
  if (n_fields > config_.max_header_count) {
    return reply_and_close(431, "the request has " + std::to_string(n_fields) +
                                    " header fields, more than the server accepts (" +
                                    std::to_string(config_.max_header_count) + ")");
  }
  request_.method = header.method();
  head_only_ = request_.method == http::verb::head;
  request_.path = target_path(std::string_view(header.target().data(), header.target().size()));
  const auto auth = header[http::field::authorization];
  request_.authorization = std::string(auth.data(), auth.size());
  keep_alive_ = header.keep_alive();
  const auto coding = header[http::field::transfer_encoding];
  if (const std::string unsupported =
          unsupported_transfer_codings(std::string_view(coding.data(), coding.size()));
      !unsupported.empty()) {
    return reply_and_close(501, "the server does not decode the transfer coding `" + unsupported +
                                    "` (send the body plain or chunked)");
  }
  if (std::optional<HttpResponse> refused = handler_.check_headers(request_)) {
    keep_alive_ = false;  // the body stays unread: this connection cannot carry another request
    return reply(std::move(*refused));
  }
  // The body and what serving it takes, estimated before any of it is read; a chunked body
  // may grow to the limit.
  const uint64_t body_bytes =
      parser_->chunked() ? config_.max_body_bytes : parser_->content_length().value_or(0);
  const auto reservation = static_cast<int64_t>(body_bytes) * kRequestMemoryPerBodyByte;
  if (reservation > 0) {
    if (!handler_.reserve_memory(reservation)) {
      return reply_and_close(503,
                             "the server holds as much request memory as it may "
                             "(--max-request-memory); retry later");
    }
    reserved_bytes_ = reservation;
  }
  if (header.find(http::field::expect) != header.end()) {
    const auto expect = header[http::field::expect];
    if (!beast::iequals(expect, "100-continue")) {
      return reply_and_close(417, "the server meets no expectation but `100-continue` (got `" +
                                      std::string(expect.data(), expect.size()) + "`)");
    }
    queue(Piece{"HTTP/1.1 100 Continue\r\n\r\n", false, nullptr, /*interim=*/true});
  }
  http::async_read(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body(ec); });
}

void HttpConnection::on_body(beast::error_code ec) {
  if (ec) return on_read_error(ec);
  stream_.expires_never();
  keep_alive_ = parser_->get().keep_alive();
  request_.body = std::move(parser_->get().body());
  parser_.reset();
  handler_.handle(shared_from_this(), std::move(request_));
}

void HttpConnection::on_read_error(beast::error_code ec) {
  if (ec == http::error::header_limit) {
    return reply_and_close(431, "the request headers are larger than the server accepts (" +
                                    std::to_string(config_.max_header_bytes) + " bytes)");
  }
  if (ec == http::error::body_limit) {
    return reply_and_close(413, "the request body is larger than the server accepts (--max-body)");
  }
  const bool http_syntax =
      ec.category() == http::make_error_code(http::error::bad_method).category();
  if (http_syntax && ec != http::error::end_of_stream && ec != http::error::partial_message) {
    return reply_and_close(400, "malformed HTTP request: " + ec.message());
  }
  // The client closed, reset, or was too slow (beast::error::timeout): nothing to answer.
  close();
}

void HttpConnection::reply_and_close(int status, const std::string& message) {
  keep_alive_ = false;
  reply(HttpResponse{status, "application/json", error_body(status, message)});
}

void HttpConnection::reply(HttpResponse response) {
  if (closed_) return;
  queue(Piece{whole_response(response, keep_alive_, head_only_), true, nullptr});
}

std::shared_ptr<ClientPresence> HttpConnection::serve_elsewhere() {
  serving_elsewhere_ = true;
  presence_ = std::make_shared<ClientPresence>();
  watch();
  return presence_;
}

// Reads while the request is served elsewhere, to see the client leave; bytes that arrive are
// the next pipelined requests, kept (up to what one request may take) for after this one.
void HttpConnection::watch() {
  if (closed_ || peer_eof_ || watching_ || buffer_.size() + kWatchReadBytes > buffer_.max_size())
    return;
  watching_ = true;
  stream_.socket().async_read_some(
      buffer_.prepare(kWatchReadBytes),
      [self = shared_from_this()](beast::error_code ec, size_t n) { self->on_watch(ec, n); });
}

void HttpConnection::on_watch(beast::error_code ec, size_t n) {
  watching_ = false;
  if (!ec) buffer_.commit(n);
  if (ec == net::error::eof) {
    peer_eof_ = true;
    if (serving_elsewhere_) probe();
  } else if (ec && ec != net::error::operation_aborted) {
    return close();  // reset: the client is gone
  }
  if (closed_) return;
  if (resume_after_watch_) {
    resume_after_watch_ = false;
    return wait_for_request();
  }
  if (!ec && serving_elsewhere_) watch();
}

// After an end of stream while a response is computed: write to learn whether the client still
// reads (half-closed) or has gone (the write fails, the request is cancelled). A whole response
// gets a space (JSON allows leading whitespace), an event stream a comment line; either way a
// request still queued in the engine is cancelled within two probes of its client leaving.
void HttpConnection::probe() {
  if (closed_ || !serving_elsewhere_) return;
  if (presence_->computing_whole_response()) {
    std::string bytes;
    if (!head_sent_) {
      bytes = response_head(200, "application/json", false, std::nullopt);
      head_sent_ = true;
      keep_alive_ = false;
    }
    bytes += chunk(" ");
    queue(Piece{std::move(bytes), false, nullptr});
  } else if (presence_->streaming_response()) {
    std::string bytes = head_sent_ ? std::string() : stream_head();
    bytes += chunk(kProbeComment);
    queue(Piece{std::move(bytes), false, nullptr});
  }
  timer_.expires_after(kProbeInterval);
  timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec) self->probe();
  });
}

void HttpConnection::finish_elsewhere(HttpResponse response) {
  net::post(stream_.get_executor(), [self = shared_from_this(), r = std::move(response)]() mutable {
    self->deliver(std::move(r));
  });
}

void HttpConnection::deliver(HttpResponse response) {
  if (closed_) return;
  if (!head_sent_) return reply(std::move(response));
  // The head went out with the probes: the body follows as the last chunks; after an event
  // stream's head (a stream that ended up answering with an error), as one event.
  if (stream_head_sent_ && !response.body.empty())
    response.body = "data: " + response.body + "\n\ndata: [DONE]\n\n";
  std::string bytes = response.body.empty() ? std::string() : chunk(response.body);
  bytes += kLastChunk;
  queue(Piece{std::move(bytes), true, nullptr});
}

std::string HttpConnection::stream_head() {
  head_sent_ = true;
  stream_head_sent_ = true;
  return response_head(200, "text/event-stream", keep_alive_, std::nullopt);
}

bool HttpConnection::write_stream(std::string_view data) {
  if (data.empty()) return true;
  auto written = std::make_shared<std::promise<bool>>();
  std::future<bool> result = written->get_future();
  net::post(stream_.get_executor(), [self = shared_from_this(), bytes = std::string(data),
                                     written]() mutable {
    if (self->closed_) return written->set_value(false);
    std::string out = self->head_sent_ ? std::string() : self->stream_head();
    out += chunk(bytes);
    self->queue(Piece{std::move(out), false, [written](bool ok) { written->set_value(ok); }});
  });
  return result.get();
}

void HttpConnection::end_stream() {
  net::post(stream_.get_executor(), [self = shared_from_this()] {
    if (self->closed_) return;
    std::string out = self->head_sent_ ? std::string() : self->stream_head();
    out += kLastChunk;
    self->queue(Piece{std::move(out), true, nullptr});
  });
}

void HttpConnection::queue(Piece piece) {
  if (closed_) {
    if (piece.written) piece.written(false);
    return;
  }
  outbox_.push_back(std::move(piece));
  if (!writing_) write_next();
}

void HttpConnection::write_next() {
  if (outbox_.empty() || closed_) return;
  writing_ = true;
  // A client that stops reading holds the write no longer than write_timeout; an interim
  // response goes out within the deadline of the request being read.
  const bool interim = outbox_.front().interim;
  if (!interim) stream_.expires_after(config_.write_timeout);
  net::async_write(stream_, net::buffer(outbox_.front().bytes),
                   [self = shared_from_this(), interim](beast::error_code ec, size_t) {
                     self->writing_ = false;
                     Piece piece = std::move(self->outbox_.front());
                     self->outbox_.pop_front();
                     if (piece.written) piece.written(!ec);
                     if (ec) return self->close();
                     if (!interim) self->stream_.expires_never();
                     if (piece.ends_response) self->after_response();
                     if (!self->writing_) self->write_next();
                   });
}

void HttpConnection::release_reservation() {
  if (reserved_bytes_ > 0) handler_.release_memory(reserved_bytes_);
  reserved_bytes_ = 0;
}

void HttpConnection::after_response() {
  release_reservation();
  serving_elsewhere_ = false;
  head_sent_ = false;
  stream_head_sent_ = false;
  presence_.reset();
  timer_.cancel();
  if (closed_) return;
  if (!keep_alive_) return close();
  if (watching_) {  // stop watching before reading the next request through the parser
    resume_after_watch_ = true;
    beast::error_code ec;
    stream_.socket().cancel(ec);
    return;
  }
  wait_for_request();
}

void HttpConnection::close_when_done() {
  keep_alive_ = false;
  if (!serving_elsewhere_ && outbox_.empty()) close();
}

void HttpConnection::close() {
  if (closed_) return;
  closed_ = true;
  timer_.cancel();
  if (serving_elsewhere_ && presence_) presence_->leave();
  beast::error_code ec;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ec);
  stream_.close();
  // The piece being written fails in its own handler; the others fail now.
  for (size_t i = writing_ ? 1 : 0; i < outbox_.size(); ++i) {
    if (outbox_[i].written) outbox_[i].written(false);
  }
  if (writing_) {
    outbox_.resize(1);
  } else {
    outbox_.clear();
  }
  handler_.closed(this);
}

}  // namespace trellis
