// `trellis serve`: the OpenAI-compatible HTTP server on the engine. It listens at once (so
// /health can say "loading"), loads the model, then serves until SIGINT or SIGTERM, when it
// cancels what still runs and exits 0.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "engine_options.h"
#include "kv/block_pool.h"
#include "server/http_server.h"

namespace trellis::cli {
namespace {

struct ServeArgs {
  EngineOptions engine;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::vector<std::string> api_keys;
  std::string api_key_file;
  std::string cache_isolation = "none";
  std::string chat_template;
  std::string max_body = "4MiB";
  int32_t max_queue = 256;
  std::string model_name;
  bool quiet = false;
};

// One key per line; blank lines and lines starting with # are skipped.
Status read_api_keys(const std::string& path, std::vector<std::string>& keys) {
  std::ifstream in(path);
  if (!in) return Error{path + ": cannot read the API key file"};
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty() && line.front() != '#') keys.push_back(line);
  }
  if (keys.empty()) return Error{path + ": no API key in the file"};
  return {};
}

std::string model_name_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.size() > 5 && name.ends_with(".gguf")) name.resize(name.size() - 5);
  return name;
}

Result<ServerConfig> server_config(ServeArgs& args) {
  ServerConfig config;
  config.host = args.host;
  config.port = args.port;
  if (args.port < 0 || args.port > 65535) return Error{"--port must be in [0, 65535]"};
  config.api_keys = args.api_keys;
  if (!args.api_key_file.empty()) TRELLIS_TRY(read_api_keys(args.api_key_file, config.api_keys));
  if (args.cache_isolation == "key") {
    config.cache_isolation = CacheIsolation::KEY;
  } else if (args.cache_isolation != "none") {
    return Error{"--cache-isolation must be none or key"};
  }
  if (!args.chat_template.empty()) {
    Result<ChatTemplateKind> kind = parse_chat_template_name(args.chat_template);
    if (!kind.ok()) return kind.error();
    config.chat_template = *kind;
  }
  Result<int64_t> body = parse_byte_size(args.max_body);
  if (!body.ok()) return Error{"--max-body: " + body.error().message};
  if (*body < 1024) return Error{"--max-body must be at least 1KiB"};
  config.max_body_bytes = static_cast<size_t>(*body);
  if (args.max_queue < 1) return Error{"--max-queue must be at least 1"};
  config.max_concurrent_requests = args.max_queue;
  config.model_id = args.model_name.empty() ? model_name_of(args.engine.model) : args.model_name;
  config.log_requests = !args.quiet;
  return config;
}

int run_serve(ServeArgs& args) {
  if (args.engine.model.empty()) {
    args.engine.model = default_model_path();
    if (Status made = ensure_default_model(args.engine.model); !made.ok()) {
      std::fprintf(stderr, "error: %s\n", made.error().message.c_str());
      return 1;
    }
  }
  Result<ServerConfig> config = server_config(args);
  if (!config.ok()) {
    std::fprintf(stderr, "error: %s\n", config.error().message.c_str());
    return 1;
  }
  // Signals go to the waiting thread below only: block them before any other thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client that left makes writes fail, not the process die

  HttpServer server(*config);
  if (Status bound = server.bind(); !bound.ok()) {
    std::fprintf(stderr, "error: %s\n", bound.error().message.c_str());
    return 1;
  }
  std::thread serving([&server] { server.serve(); });
  std::fprintf(stderr, "listening on http://%s:%d (loading %s)\n", config->host.c_str(),
               server.port(), args.engine.model.c_str());
  std::unique_ptr<Engine> engine = args.engine.open_engine([](EngineConfig&) {});
  if (!engine) {
    server.shutdown();
    serving.join();
    return 1;
  }
  server.set_engine(*engine);
  std::fprintf(stderr, "ready: model %s, context %d, %d threads, cache isolation %s%s\n",
               config->model_id.c_str(), engine->n_ctx(), engine->n_threads(),
               args.cache_isolation.c_str(), config->api_keys.empty() ? "" : ", API key required");
  int signal = 0;
  sigwait(&signals, &signal);
  std::fprintf(stderr, "%s: shutting down (running requests are cancelled)\n",
               signal == SIGINT ? "SIGINT" : "SIGTERM");
  server.shutdown();
  serving.join();
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("serve", "Serve the OpenAI-compatible HTTP API");
  auto args = std::make_shared<ServeArgs>();
  args->engine.add_to(*cmd, /*model_required=*/false);
  args->engine.add_scheduler_options(*cmd);
  cmd->add_option("--host", args->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", args->port, "Port (0: any free one)")->capture_default_str();
  cmd->add_option("--api-key", args->api_keys,
                  "Require Authorization: Bearer KEY (repeat for several keys)");
  cmd->add_option("--api-key-file", args->api_key_file, "File with one accepted API key per line");
  cmd->add_option("--cache-isolation", args->cache_isolation,
                  "none: all clients share the prefix cache; key: one cache namespace per API key")
      ->capture_default_str();
  cmd->add_option("--chat-template", args->chat_template,
                  "Chat format: llama2, zephyr, chatml, llama3, mistral, gemma, phi3, qwen3 "
                  "(default: from the model)");
  cmd->add_option("--max-body", args->max_body, "Largest request body (B, KiB, MiB)")
      ->capture_default_str();
  cmd->add_option("--max-queue", args->max_queue,
                  "Generation requests served at once; more get 429")
      ->capture_default_str();
  cmd->add_option("--model-name", args->model_name,
                  "Model id in the API (default: the file name without .gguf)");
  cmd->add_flag("--quiet", args->quiet, "No per-request log lines");
  cmd->callback([&exit_code, args] { exit_code = run_serve(*args); });
}

}  // namespace trellis::cli
