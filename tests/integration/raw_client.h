// A plain TCP client of a loopback port for the transport's tests: it sends exact bytes, reads
// with bounded waits, half-closes or leaves when told.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

namespace trellis::testing {

// A plain TCP client; every read gives up after its timeout.
class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawClient() { close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  // False once the server has closed its side (the rest is then not sent).
  bool send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Reads until `done(received)` holds, the server closes, or the timeout passes.
  std::string read_until(const std::function<bool(const std::string&)>& done,
                         std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::string received;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done(received) && std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buffer[4096];
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) {
        closed_by_server_ = true;
        break;
      }
      received.append(buffer, static_cast<size_t>(n));
    }
    return received;
  }
  std::string read_all(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return read_until([](const std::string&) { return false; }, timeout);
  }
  bool closed_by_server() const { return closed_by_server_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool closed_by_server_ = false;
};

// A POST with a JSON body, as raw bytes (`extra_headers`: whole lines, each ending "\r\n").
inline std::string post_request(const std::string& path, const std::string& body,
                                const std::string& extra_headers = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n" +
         extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace trellis::testing
