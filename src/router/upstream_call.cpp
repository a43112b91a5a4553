#include "router/upstream_call.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>

namespace trellis {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

// A response body may be as long as a generation makes it; this only stops a runaway replica.
constexpr uint64_t kMaxBodyBytes = uint64_t{1} << 30;

}  // namespace

Result<ReplicaAddress> parse_replica_url(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  const std::string quoted = "'" + std::string(url) + "'";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return Error{"replica URL " + quoted + " must start with http://"};
  }
  std::string_view rest = url.substr(kScheme.size());
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) {
    return Error{"replica URL " + quoted + " must have no path (http://host:port)"};
  }
  ReplicaAddress address;
  const size_t colon = rest.rfind(':');
  address.host = std::string(rest.substr(0, colon));
  address.port = 80;
  if (colon != std::string_view::npos) {
    const std::string_view port = rest.substr(colon + 1);
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), address.port);
    if (ec != std::errc() || end != port.data() + port.size() || address.port < 1 ||
        address.port > 65535) {
      return Error{"replica URL " + quoted + " has a bad port"};
    }
  }
  if (address.host.empty()) return Error{"replica URL " + quoted + " has no host"};
  return address;
}

// The connection and its parser; every operation runs on `context`, driven by the calling
// thread, so that the only cross-thread step is cancel()'s post.
struct UpstreamCall::Io {
  net::io_context context{1};
  beast::tcp_stream stream{context};
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;

  // Starts an operation with a completion handler taking (error_code, size_t) and runs the
  // context until it completes.
  template <typename Start>
  beast::error_code run(Start start) {
    bool done = false;
    beast::error_code result;
    start([&done, &result](beast::error_code ec, size_t) {
      result = ec;
      done = true;
    });
    context.restart();
    while (!done && context.run_one() > 0) {
    }
    return result;
  }
};

UpstreamCall::UpstreamCall(ReplicaAddress address, UpstreamTimeouts timeouts)
    : address_(std::move(address)), timeouts_(timeouts), io_(std::make_unique<Io>()) {
  io_->parser.body_limit(kMaxBodyBytes);
}

UpstreamCall::~UpstreamCall() = default;

Status UpstreamCall::start(const UpstreamRequest& request) {
  const std::string where = address_.url();
  if (cancelled_) return Error{"cancelled"};
  beast::error_code ec;
  net::ip::tcp::resolver resolver(io_->context);
  const auto endpoints = resolver.resolve(address_.host, std::to_string(address_.port), ec);
  if (ec) return Error{"cannot resolve " + where + ": " + ec.message()};

  io_->stream.expires_after(timeouts_.connect);
  ec = io_->run([&](auto handler) {
    io_->stream.async_connect(endpoints, [handler](beast::error_code e, const auto&) mutable {
      handler(e, 0);
    });
  });
  if (cancelled_) return Error{"cancelled"};
  if (ec) return Error{"cannot connect to " + where + ": " + ec.message()};

  http::request<http::string_body> message{
      request.method == "GET" ? http::verb::get : http::verb::post, request.target, 11};
  message.set(http::field::host, address_.host + ":" + std::to_string(address_.port));
  message.set(http::field::user_agent, "trellis-router");
  if (!request.api_key.empty()) message.set(http::field::authorization, "Bearer " + request.api_key);
  if (message.method() == http::verb::post) {
    message.set(http::field::content_type, "application/json");
    message.body() = request.body;
  }
  message.keep_alive(false);
  message.prepare_payload();
  io_->stream.expires_after(timeouts_.read);
  ec = io_->run([&](auto handler) { http::async_write(io_->stream, message, handler); });
  if (cancelled_) return Error{"cancelled"};
  if (ec) return Error{"cannot send the request to " + where + ": " + ec.message()};

  io_->stream.expires_after(timeouts_.read);
  ec = io_->run([&](auto handler) {
    http::async_read_header(io_->stream, io_->buffer, io_->parser, handler);
  });
  if (cancelled_) return Error{"cancelled"};
  if (ec) return Error{"no response from " + where + ": " + ec.message()};
  return {};
}

int UpstreamCall::status() const {
  return static_cast<int>(io_->parser.get().result_int());
}

std::string UpstreamCall::content_type() const {
  return std::string(io_->parser.get()[http::field::content_type]);
}

Result<bool> UpstreamCall::read_some(std::string& out) {
  std::string& body = io_->parser.get().body();
  if (!body.empty() || io_->parser.is_done()) {  // left by the head's read
    out += body;
    body.clear();
    return !io_->parser.is_done();
  }
  io_->stream.expires_after(timeouts_.read);
  const beast::error_code ec = io_->run([&](auto handler) {
    http::async_read_some(io_->stream, io_->buffer, io_->parser, handler);
  });
  if (cancelled_) return Error{"cancelled"};
  if (ec && ec != http::error::end_of_stream) {
    return Error{"the response from " + address_.url() + " broke off: " + ec.message()};
  }
  out += body;
  body.clear();
  if (ec == http::error::end_of_stream && !io_->parser.is_done()) {
    return Error{"the response from " + address_.url() + " broke off: end of stream"};
  }
  return !io_->parser.is_done();
}

Result<std::string> UpstreamCall::read_rest() {
  std::string all;
  while (true) {
    Result<bool> more = read_some(all);
    if (!more.ok()) return more.error();
    if (!*more) return all;
  }
}

void UpstreamCall::cancel() {
  if (cancelled_.exchange(true)) return;
  Io* io = io_.get();
  net::post(io->context, [io] {
    beast::error_code ignored;
    io->stream.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
    io->stream.close();
  });
}

}  // namespace trellis
