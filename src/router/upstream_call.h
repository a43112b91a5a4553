// One HTTP/1.1 exchange between the router and a replica, driven by the thread that forwards a
// request: connect, send, read the response head, then the body piece by piece as it arrives (a
// stream is passed on as it comes). Every step has a deadline. cancel(), from any thread (say,
// when the router's own client leaves), closes the connection: the step under way fails at once,
// and a `trellis serve` replica sees its client leave, cancels the request and frees its blocks.
//
//   UpstreamCall call(address, timeouts);
//   if (Status s = call.start({"POST", "/v1/completions", body, key}); !s.ok()) ...
//   std::string piece;
//   while (true) { Result<bool> more = call.read_some(piece); ... }
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"

namespace trellis {

struct ReplicaAddress {
  std::string host;
  int port = 0;
  std::string url() const { return "http://" + host + ":" + std::to_string(port); }
};

// "http://host:port" (a trailing slash allowed; the port defaults to 80); an error names what is
// wrong. Only plain HTTP: replicas are reached on a private network or loopback.
Result<ReplicaAddress> parse_replica_url(std::string_view url);

struct UpstreamRequest {
  std::string method = "POST";  // "GET" or "POST"
  std::string target;           // "/v1/completions"
  std::string body;             // JSON (POST)
  std::string api_key;          // sent as a bearer token when not empty
};

struct UpstreamTimeouts {
  std::chrono::milliseconds connect{2000};
  // The longest wait for the next bytes of the response (the head of a whole response comes
  // only once it is generated).
  std::chrono::milliseconds read{600000};
};

class UpstreamCall {
 public:
  UpstreamCall(ReplicaAddress address, UpstreamTimeouts timeouts);
  ~UpstreamCall();
  UpstreamCall(const UpstreamCall&) = delete;
  UpstreamCall& operator=(const UpstreamCall&) = delete;

  // Connects, sends `request` and reads the head of the response. An error says which step
  // failed and why ("cannot connect to http://...: Connection refused").
  Status start(const UpstreamRequest& request);
  // After start().
  int status() const;
  std::string content_type() const;

  // Appends the next bytes of the body to `out`; false once the body is complete.
  Result<bool> read_some(std::string& out);
  // The rest of the body.
  Result<std::string> read_rest();

  // Thread-safe; the call fails from now on.
  void cancel();
  bool cancelled() const { return cancelled_.load(); }

 private:
  struct Io;

  ReplicaAddress address_;
  UpstreamTimeouts timeouts_;
  std::unique_ptr<Io> io_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace trellis
