// A scripted HTTP peer on a free loopback port, for the router's failure paths: each connection's
// request (head and body) is read, then `respond` gives the exact bytes to write back before the
// connection is closed: an error status, a stream that breaks off, nothing at all.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

namespace trellis::testing {

class FakeReplica {
 public:
  // `respond(request)`: the bytes to send for `request` (its head and body as received).
  explicit FakeReplica(std::function<std::string(const std::string&)> respond)
      : respond_(std::move(respond)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        ::listen(listener_, 64) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      std::abort();  // a test machine without loopback sockets cannot run these tests
    }
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeReplica() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
  }
  FakeReplica(const FakeReplica&) = delete;
  FakeReplica& operator=(const FakeReplica&) = delete;

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_.load(); }

  // An HTTP/1.1 response head; the body that follows has no length (the close ends it).
  static std::string head(int status, const std::string& content_type) {
    return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: " + content_type +
           "\r\nConnection: close\r\n\r\n";
  }
  // The head of a chunked event stream, as `trellis serve` sends one; chunk() gives its pieces,
  // and a close before the last (empty) chunk is a response that broke off.
  static std::string stream_head() {
    return "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: "
           "chunked\r\n\r\n";
  }
  static std::string chunk(const std::string& data) {
    char size[32];
    std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
    return size + data + "\r\n";
  }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) continue;
      const std::string request = read_request(fd);
      ++requests_;
      const std::string reply = respond_(request);
      size_t sent = 0;
      while (sent < reply.size()) {
        const ssize_t n = ::send(fd, reply.data() + sent, reply.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) break;
        sent += static_cast<size_t>(n);
      }
      ::shutdown(fd, SHUT_RDWR);
      ::close(fd);
    }
  }

  // The head, then as many body bytes as Content-Length says (bounded waits throughout).
  static std::string read_request(int fd) {
    std::string data;
    char buffer[4096];
    size_t need = std::string::npos;
    while (need == std::string::npos || data.size() < need) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 2000) <= 0) break;
      const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      data.append(buffer, static_cast<size_t>(n));
      const size_t end = data.find("\r\n\r\n");
      if (need == std::string::npos && end != std::string::npos) {
        const size_t at = data.find("Content-Length: ");
        const size_t length = at == std::string::npos || at > end
                                  ? 0
                                  : static_cast<size_t>(std::atol(data.c_str() + at + 16));
        need = end + 4 + length;
      }
    }
    return data;
  }

  std::function<std::string(const std::string&)> respond_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

}  // namespace trellis::testing
