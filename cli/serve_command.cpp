// `trellis serve`: the OpenAI-compatible HTTP server on the engine. It checks its options, listens
// (so /health can say "loading"), loads the model, then serves until SIGINT or SIGTERM, when it
// cancels what still runs and exits 0. Any error before serving exits 1 with one line; a signal
// during start-up exits at once.
#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <mutex>
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
  int32_t max_connections = 1024;
  double request_timeout_s = 10;
  double idle_timeout_s = 5;
  std::string model_name;
  bool quiet = false;
};

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
  for (const std::string& key : args.api_keys) {
    if (trimmed(key).empty()) return Error{"--api-key must not be empty"};
    if (trimmed(key) != key) return Error{"--api-key must not begin or end with whitespace"};
  }
  config.api_keys = args.api_keys;
  if (!args.api_key_file.empty()) TRELLIS_TRY(read_api_keys(args.api_key_file, config.api_keys));
  if (args.cache_isolation == "key") {
    // Without keys every client would share one namespace: isolation in name only.
    if (config.api_keys.empty())
      return Error{"--cache-isolation key needs API keys (--api-key or --api-key-file)"};
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
  if (args.max_connections < 1) return Error{"--max-connections must be at least 1"};
  config.max_connections = args.max_connections;
  if (args.request_timeout_s <= 0 || args.idle_timeout_s <= 0)
    return Error{"--request-timeout and --idle-timeout must be positive"};
  config.request_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(args.request_timeout_s * 1000));
  config.idle_timeout = std::chrono::milliseconds(static_cast<int64_t>(args.idle_timeout_s * 1000));
  config.model_id = args.model_name.empty() ? model_name_of(args.engine.model) : args.model_name;
  config.log_requests = !args.quiet;
  return config;
}

// Waits for SIGINT or SIGTERM (blocked in every thread) on its own thread: during start-up the
// process exits at once; once serving, wait() returns and the caller shuts down gracefully.
class SignalWaiter {
 public:
  explicit SignalWaiter(const sigset_t& signals)
      : thread_([this, signals] {
          int signal = 0;
          sigwait(&signals, &signal);
          std::unique_lock<std::mutex> lock(mutex_);
          if (!serving_) {
            std::fprintf(stderr, "%s during start-up: exiting\n", name(signal));
            std::_Exit(1);
          }
          signal_ = signal;
          arrived_.notify_all();
        }) {
    thread_.detach();  // it ends with the process
  }
  void serving() {
    std::lock_guard<std::mutex> lock(mutex_);
    serving_ = true;
  }
  // The engine stopped for good: wait() returns kEngineFailed.
  void engine_failed() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (signal_ == 0) signal_ = kEngineFailed;
    arrived_.notify_all();
  }
  int wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    arrived_.wait(lock, [this] { return signal_ != 0; });
    return signal_;
  }
  static constexpr int kEngineFailed = -1;
  static const char* name(int signal) {
    return signal == kEngineFailed ? "the engine stopped"
           : signal == SIGINT      ? "SIGINT"
                                   : "SIGTERM";
  }

 private:
  std::mutex mutex_;
  std::condition_variable arrived_;
  bool serving_ = false;
  int signal_ = 0;
  std::thread thread_;
};

int run_serve(ServeArgs& args) {
  // Signals go to the waiter only: block them before any other thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client that left makes writes fail, not the process die
  // With --pipeline, the other ranks run their stage and exit here (before any server exists);
  // MPI's threads start now, with the signals blocked like every other thread.
  if (!args.engine.join_pipeline()) return 1;
  // Never freed (its detached thread lives as long as the process); a static pointer keeps it
  // reachable, so leak checkers do not count it.
  static SignalWaiter* const kWaiter = new SignalWaiter(signals);
  SignalWaiter& waiter = *kWaiter;

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
  // The engine options are checked before listening: a mistake there never starts a server.
  if (Result<EngineConfig> engine_config = args.engine.engine_config(); !engine_config.ok()) {
    std::fprintf(stderr, "error: %s\n", engine_config.error().message.c_str());
    return 1;
  }
  HttpServer server(*config);
  if (Status bound = server.bind(); !bound.ok()) {
    std::fprintf(stderr, "error: %s\n", bound.error().message.c_str());
    return 1;
  }
  std::thread serving([&server] { server.serve(); });
  std::fprintf(stderr, "listening on http://%s:%d (loading %s)\n", config->host.c_str(),
               server.port(), args.engine.model.c_str());
  std::unique_ptr<Engine> engine = args.engine.open_engine([&waiter](EngineConfig& c) {
    // New requests get 503s (the service sees the failure) while the server shuts down.
    c.on_failure = [&waiter, next = c.on_failure](const std::string& why) {
      if (next) next(why);
      waiter.engine_failed();
    };
  });
  if (!engine) {
    server.shutdown();
    serving.join();
    return 1;
  }
  server.set_engine(*engine);
  waiter.serving();
  std::fprintf(stderr, "ready: model %s, context %d, %d threads, cache isolation %s%s\n",
               config->model_id.c_str(), engine->n_ctx(), engine->n_threads(),
               args.cache_isolation.c_str(), config->api_keys.empty() ? "" : ", API key required");
  const int signal = waiter.wait();
  std::fprintf(stderr, "%s: shutting down (running requests are cancelled)\n",
               SignalWaiter::name(signal));
  server.shutdown();
  serving.join();
  return signal == SignalWaiter::kEngineFailed ? 1 : 0;
}

}  // namespace

void add_serve_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("serve", "Serve the OpenAI-compatible HTTP API");
  auto args = std::make_shared<ServeArgs>();
  args->engine.add_to(*cmd, /*model_required=*/false);
  args->engine.add_pipeline_options(*cmd);
  args->engine.add_scheduler_options(*cmd);
  args->engine.add_disk_tier_options(*cmd);
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
  cmd->add_option("--max-connections", args->max_connections,
                  "Connections open at once; more are refused with 503")
      ->capture_default_str();
  cmd->add_option("--request-timeout", args->request_timeout_s,
                  "Seconds a client has to send a request's headers and body")
      ->capture_default_str();
  cmd->add_option("--idle-timeout", args->idle_timeout_s,
                  "Seconds a kept-alive connection may wait for its next request")
      ->capture_default_str();
  cmd->add_option("--model-name", args->model_name,
                  "Model id in the API (default: the file name without .gguf)");
  cmd->add_flag("--quiet", args->quiet, "No per-request log lines");
  cmd->callback([&exit_code, args] { exit_code = run_serve(*args); });
}

}  // namespace trellis::cli
