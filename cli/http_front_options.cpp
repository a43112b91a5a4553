#include "http_front_options.h"

#include <fstream>

#include "engine_options.h"

namespace trellis::cli {
namespace {

std::string trimmed(const std::string& text) {
  constexpr const char* kSpace = " \t\r\n\v\f";
  const size_t first = text.find_first_not_of(kSpace);
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(kSpace) - first + 1);
}

// One key per line, without the whitespace around it; blank lines and lines starting with # are
// skipped.
Status read_api_keys(const std::string& path, std::vector<std::string>& keys) {
  std::ifstream in(path);
  if (!in) return Error{path + ": cannot read the API key file"};
  std::string line;
  while (std::getline(in, line)) {
    line = trimmed(line);
    if (!line.empty() && line.front() != '#') keys.push_back(line);
  }
  if (keys.empty()) return Error{path + ": no API key in the file"};
  return {};
}

std::chrono::milliseconds milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

}  // namespace

void HttpFrontOptions::add_to(CLI::App& cmd) {
  cmd.add_option("--host", host, "Address to listen on")->capture_default_str();
  cmd.add_option("--port", port, "Port (0: any free one)")->capture_default_str();
  cmd.add_option("--api-key", api_keys,
                 "Require Authorization: Bearer KEY (repeat for several keys)");
  cmd.add_option("--api-key-file", api_key_file, "File with one accepted API key per line");
  cmd.add_option("--cache-isolation", cache_isolation,
                 "none: all clients share the prefix cache; key: one cache namespace per API key")
      ->capture_default_str();
  cmd.add_option("--max-body", max_body, "Largest request body (B, KiB, MiB)")
      ->capture_default_str();
  cmd.add_option("--max-request-memory", max_request_memory,
                 "Memory the requests in flight may hold together, estimated from their bodies "
                 "(4 bytes per body byte); beyond it, 503 before the body is read")
      ->capture_default_str();
  cmd.add_option("--max-queue", max_queue, "Generation requests served at once; more get 429")
      ->capture_default_str();
  cmd.add_option("--max-connections", max_connections,
                 "Connections open at once; more are refused with 503")
      ->capture_default_str();
  cmd.add_option("--request-timeout", request_timeout_s,
                 "Seconds a client has to send a request's headers and body")
      ->capture_default_str();
  cmd.add_option("--idle-timeout", idle_timeout_s,
                 "Seconds a kept-alive connection may wait for its next request")
      ->capture_default_str();
  cmd.add_flag("--quiet", quiet, "No per-request log lines");
}

Result<ServerConfig> HttpFrontOptions::server_config() const {
  ServerConfig config;
  config.host = host;
  config.port = port;
  if (port < 0 || port > 65535) return Error{"--port must be in [0, 65535]"};
  for (const std::string& key : api_keys) {
    if (trimmed(key).empty()) return Error{"--api-key must not be empty"};
    if (trimmed(key) != key) return Error{"--api-key must not begin or end with whitespace"};
  }
  config.api_keys = api_keys;
  if (!api_key_file.empty()) TRELLIS_TRY(read_api_keys(api_key_file, config.api_keys));
  if (cache_isolation == "key") {
    // Without keys every client would share one namespace: isolation in name only.
    if (config.api_keys.empty())
      return Error{"--cache-isolation key needs API keys (--api-key or --api-key-file)"};
    config.cache_isolation = CacheIsolation::KEY;
  } else if (cache_isolation != "none") {
    return Error{"--cache-isolation must be none or key"};
  }
  Result<int64_t> body = parse_byte_size(max_body);
  if (!body.ok()) return Error{"--max-body: " + body.error().message};
  if (*body < 1024) return Error{"--max-body must be at least 1KiB"};
  config.max_body_bytes = static_cast<size_t>(*body);
  Result<int64_t> memory = parse_byte_size(max_request_memory);
  if (!memory.ok()) return Error{"--max-request-memory: " + memory.error().message};
  if (*memory < kRequestMemoryPerBodyByte * *body) {
    return Error{"--max-request-memory must hold at least one largest body (" +
                 std::to_string(kRequestMemoryPerBodyByte) + " x --max-body)"};
  }
  config.max_request_memory = *memory;
  if (max_queue < 1) return Error{"--max-queue must be at least 1"};
  config.max_concurrent_requests = max_queue;
  if (max_connections < 1) return Error{"--max-connections must be at least 1"};
  config.max_connections = max_connections;
  if (request_timeout_s <= 0 || idle_timeout_s <= 0)
    return Error{"--request-timeout and --idle-timeout must be positive"};
  config.request_timeout = milliseconds(request_timeout_s);
  config.idle_timeout = milliseconds(idle_timeout_s);
  config.log_requests = !quiet;
  return config;
}

}  // namespace trellis::cli
