// The options of an HTTP front, shared by `trellis serve` and `trellis route`: where to listen,
// which API keys are accepted, how far the prefix cache is shared between them, and the limits
// that turn excess into clear errors.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "base/result.h"
#include "server/server_config.h"

namespace trellis::cli {

struct HttpFrontOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::vector<std::string> api_keys;
  std::string api_key_file;
  std::string cache_isolation = "none";
  std::string max_body = "4MiB";
  std::string max_request_memory = "1GiB";
  int32_t max_queue = 256;
  int32_t max_connections = 1024;
  double request_timeout_s = 10;
  double idle_timeout_s = 5;
  bool quiet = false;

  void add_to(CLI::App& cmd);
  // Checked; model_id and chat_template are left to the caller.
  Result<ServerConfig> server_config() const;
};

}  // namespace trellis::cli
