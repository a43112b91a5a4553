// `trellis serve`: the OpenAI-compatible HTTP server on the engine. It checks its options, listens
// (so /health can say "loading"), loads the model, then serves until SIGINT, SIGTERM or SIGHUP,
// when it cancels what still runs and exits 0. Any error before serving exits 1 with one line; a
// signal during start-up exits at once. With several models (--models-dir, -m NAME=FILE) it
// serves a hub (server/model_hub.h) that loads each model on first use.
#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>

#include "commands.h"
#include "embed/embedder.h"
#include "engine_options.h"
#include "http_front_options.h"
#include "kv/block_pool.h"
#include "server/embedding_service.h"
#include "server/http_server.h"
#include "server/model_hub.h"
#include "serve_models.h"
#include "signal_waiter.h"

namespace trellis::cli {
namespace {

struct ServeArgs {
  EngineOptions engine;
  std::vector<std::string> models;  // the -m values: one FILE, or NAME=FILE entries
  std::string models_dir;
  int32_t models_max = 0;
  std::string models_memory;
  double models_load_wait = 300;
  double models_keep_alive = 0;
  HttpFrontOptions front;
  std::string config_file;  // expanded before the parse (cli/config_file.h)
  std::string chat_template;
  std::string model_name;
  std::string json_whitespace = "compact";
  int64_t grammar_max_elements = GrammarLimits{}.max_elements;
  bool no_jump_forward = false;
  std::string reasoning = "separate";
};

Result<ServerConfig> server_config(ServeArgs& args) {
  Result<ServerConfig> config = args.front.server_config();
  if (!config.ok()) return config;
  if (!args.chat_template.empty()) {
    Result<ChatTemplateKind> kind = parse_chat_template_name(args.chat_template);
    if (!kind.ok()) return kind.error();
    config->chat_template = *kind;
  }
  config->model_id = args.model_name.empty() ? model_name_of(args.engine.model) : args.model_name;
  if (args.json_whitespace == "flexible") {
    config->json_grammar.whitespace = JsonWhitespace::FLEXIBLE;
  } else if (args.json_whitespace != "compact") {
    return Error{"--json-whitespace must be compact or flexible, not '" + args.json_whitespace +
                 "'"};
  }
  if (args.grammar_max_elements < 1000)
    return Error{"--grammar-max-elements must be at least 1000"};
  config->json_grammar.limits.max_elements = args.grammar_max_elements;
  if (args.reasoning != "separate" && args.reasoning != "inline")
    return Error{"--reasoning must be separate or inline, not '" + args.reasoning + "'"};
  config->separate_reasoning = args.reasoning == "separate";
  return config;
}

// The server of an embedding model or reranker: /v1/embeddings or /v1/rerank
// (server/embedding_service.h).
int run_embedding_serve(ServeArgs& args, const ServerConfig& config, SignalWaiter& waiter) {
  Result<std::unique_ptr<Embedder>> embedder =
      Embedder::open(args.engine.model,
                     EmbedderOptions{.n_threads = args.engine.threads,
                                     .max_batch_tokens = std::max(args.engine.batch_tokens, 2048)});
  if (!embedder.ok()) {
    std::fprintf(stderr, "error: %s\n", embedder.error().message.c_str());
    return 1;
  }
  ServerConfig embedding_config = config;
  embedding_config.chat_page = false;
  HttpServer server(embedding_config, EmbeddingService::endpoints());
  if (Status bound = server.bind(); !bound.ok()) {
    std::fprintf(stderr, "error: %s\n", bound.error().message.c_str());
    return 1;
  }
  std::thread serving([&server] { server.serve(); });
  std::fprintf(stderr, "listening on http://%s:%d (%s)\n", config.host.c_str(), server.port(),
               args.engine.model.c_str());
  EmbeddingService service(**embedder, embedding_config, std::max(args.engine.batch_tokens, 2048));
  server.set_api(service);
  waiter.serving();
  std::fprintf(stderr, "ready: %s %s, context %d, %d threads, on http://%s:%d%s\n",
               (*embedder)->is_reranker() ? "reranker" : "embedding model", config.model_id.c_str(),
               (*embedder)->n_ctx(), (*embedder)->n_threads(), config.host.c_str(), server.port(),
               (*embedder)->is_reranker() ? "/v1/rerank" : "/v1/embeddings");
  const int signal = waiter.wait();
  std::fprintf(stderr, "%s: shutting down\n", SignalWaiter::name(signal));
  server.shutdown();
  serving.join();
  return signal == SignalWaiter::kFailed ? 1 : 0;
}

// The chat page's address; an address that listens everywhere is opened through loopback.
void print_chat_page(const std::string& host, int port) {
  const bool any = host == "0.0.0.0" || host == "::" || host.empty();
  const std::string page_host = any                                  ? "127.0.0.1"
                                : host.find(':') != std::string::npos ? "[" + host + "]"
                                                                      : host;
  std::fprintf(stderr, "chat page: http://%s:%d/\n", page_host.c_str(), port);
}

Result<HubOptions> hub_options(const ServeArgs& args) {
  if (args.models_max < 0) return Error{"--models-max must not be negative"};
  if (!(args.models_load_wait > 0)) return Error{"--models-load-wait must be positive"};
  HubOptions options;
  options.max_loaded = args.models_max;
  options.load_wait = std::chrono::milliseconds(static_cast<int64_t>(args.models_load_wait * 1000));
  if (!args.models_memory.empty()) {
    Result<int64_t> bytes = parse_byte_size(args.models_memory);
    if (!bytes.ok()) return Error{"--models-memory: " + bytes.error().message};
    if (*bytes <= 0) return Error{"--models-memory must be positive"};
    options.max_memory_bytes = *bytes;
  }
  if (!(args.models_keep_alive >= 0)) return Error{"--models-keep-alive must not be negative"};
  options.keep_alive =
      std::chrono::milliseconds(static_cast<int64_t>(args.models_keep_alive * 1000));
  options.on_unload = [](const HubModel& model, const char* why) {
    std::fprintf(stderr, "unloaded %s (%s)\n", model.name.c_str(), why);
  };
  return options;
}

// Several models behind one server: each loads on first use (server/model_hub.h).
int run_hub_serve(ServeArgs& args, SignalWaiter& waiter) {
  auto fail = [](const std::string& why) {
    std::fprintf(stderr, "error: %s\n", why.c_str());
    return 1;
  };
  if (args.engine.pipeline) return fail("--pipeline serves one model: give one -m FILE");
  if (!args.engine.draft_model.empty())
    return fail("--draft-model drafts for one model: give one -m FILE");
  if (!args.model_name.empty())
    return fail("--model-name names one model: name several with -m NAME=FILE");
  Result<ServerConfig> config = server_config(args);
  if (!config.ok()) return fail(config.error().message);
  Result<EngineConfig> engine_config = args.engine.engine_config();
  if (!engine_config.ok()) return fail(engine_config.error().message);
  Result<HubOptions> options = hub_options(args);
  if (!options.ok()) return fail(options.error().message);
  Result<std::vector<HubModel>> models =
      hub_models(args.models, args.models_dir, engine_config->kv_bytes);
  if (!models.ok()) return fail(models.error().message);
  // The hub outlives the server, whose destructor still reaches it.
  const bool jump_forward = !args.no_jump_forward;
  ModelHub hub(*models,
               hub_loader(args.engine, *config,
                          [jump_forward](EngineConfig& c) { c.jump_forward = jump_forward; }),
               *options);
  HttpServer server(*config, ModelHub::endpoints());
  if (Status bound = server.bind(); !bound.ok()) return fail(bound.error().message);
  std::thread serving([&server] { server.serve(); });
  std::string names;
  for (const HubModel& model : *models) names += (names.empty() ? "" : ", ") + model.name;
  std::fprintf(stderr, "listening on http://%s:%d (%zu models)\n", config->host.c_str(),
               server.port(), models->size());
  server.set_api(hub);
  waiter.serving();
  std::fprintf(stderr, "ready: %zu models (%s), each loaded on first use%s\n", models->size(),
               names.c_str(), config->api_keys.empty() ? "" : ", API key required");
  print_chat_page(config->host, server.port());
  const int signal = waiter.wait();
  std::fprintf(stderr, "%s: shutting down (running requests are cancelled)\n",
               SignalWaiter::name(signal));
  server.shutdown();
  serving.join();
  return signal == SignalWaiter::kFailed ? 1 : 0;
}

bool is_embedding_path(const std::string& path) {
  Result<GgufFile> file = GgufFile::open(path);
  return file.ok() && is_embedding_file(*file);
}

int run_serve(ServeArgs& args) {
  // Signals go to the waiter only: block them before any other thread starts.
  const sigset_t signals = SignalWaiter::block_stop_signals();
  if (wants_model_hub(args.models, args.models_dir))
    return run_hub_serve(args, SignalWaiter::start(signals));
  if (!args.models.empty()) args.engine.model = args.models.front();
  // With --pipeline, the other ranks run their stage and exit here (before any server exists);
  // MPI's threads start now, with the signals blocked like every other thread.
  if (!args.engine.join_pipeline()) return 1;
  SignalWaiter& waiter = SignalWaiter::start(signals);

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
  if (is_embedding_path(args.engine.model)) return run_embedding_serve(args, *config, waiter);
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
  std::unique_ptr<Engine> engine = args.engine.open_engine([&waiter, &args](EngineConfig& c) {
    c.jump_forward = !args.no_jump_forward;
    // New requests get 503s (the service sees the failure) while the server shuts down.
    c.on_failure = [&waiter, next = c.on_failure](const std::string& why) {
      if (next) next(why);
      waiter.failed();
    };
  });
  if (!engine) {
    server.shutdown();
    serving.join();
    return 1;
  }
  server.set_engine(*engine);
  if (const std::string& why = server.service()->chat_template_warning(); !why.empty())
    std::fprintf(stderr, "warning: %s\n", why.c_str());
  waiter.serving();
  std::fprintf(stderr, "ready: model %s, context %d, %d threads, cache isolation %s%s\n",
               config->model_id.c_str(), engine->n_ctx(), engine->n_threads(),
               args.front.cache_isolation.c_str(),
               config->api_keys.empty() ? "" : ", API key required");
  print_chat_page(config->host, server.port());
  const int signal = waiter.wait();
  std::fprintf(stderr, "%s: shutting down (running requests are cancelled)\n",
               SignalWaiter::name(signal));
  server.shutdown();
  serving.join();
  return signal == SignalWaiter::kFailed ? 1 : 0;
}

}  // namespace

void add_serve_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("serve", "Serve the OpenAI-compatible HTTP API");
  auto args = std::make_shared<ServeArgs>();
  // Read before the parse (cli/config_file.h); here for --help and completion.
  cmd->add_option("--config", args->config_file,
                  "Read flags from this file: one 'name = value' line per flag, its long name "
                  "(port = 8080, kv-mem = 2GiB, quiet = true); the command line's win. "
                  "The service reads /etc/trellis/serve.conf");
  args->engine.add_to(*cmd, /*model_required=*/false, &args->models);
  args->engine.add_pipeline_options(*cmd);
  args->engine.add_scheduler_options(*cmd);
  args->engine.add_disk_tier_options(*cmd);
  args->front.add_to(*cmd);
  cmd->add_option("--models-dir", args->models_dir,
                  "Serve every .gguf file of this directory, named after the file (without "
                  ".gguf); each loads on first use");
  cmd->add_option("--models-max", args->models_max,
                  "With several models: the most loaded at once (least recently used unloads "
                  "first; 0: no limit)")
      ->capture_default_str();
  cmd->add_option("--models-memory", args->models_memory,
                  "With several models: the memory loaded models may hold together (weights and "
                  "KV pools), e.g. 16GiB");
  cmd->add_option("--models-keep-alive", args->models_keep_alive,
                  "With several models: seconds a model stays loaded after its last request "
                  "(0: until its room is needed)")
      ->capture_default_str();
  cmd->add_option("--models-load-wait", args->models_load_wait,
                  "With several models: seconds a request waits for its model to load before "
                  "a 503")
      ->capture_default_str();
  cmd->add_option("--chat-template", args->chat_template,
                  "Chat format: llama2, zephyr, chatml, llama3, mistral, gemma, phi3, qwen3 "
                  "(default: from the model)");
  cmd->add_option("--model-name", args->model_name,
                  "Model id in the API (default: the file name without .gguf)");
  cmd->add_option("--json-whitespace", args->json_whitespace,
                  "Whitespace in schema-constrained JSON: compact (none, as OpenAI's strict mode "
                  "writes it) or flexible (bounded runs around punctuation)")
      ->capture_default_str();
  cmd->add_option("--grammar-max-elements", args->grammar_max_elements,
                  "Largest compiled grammar (elements, repetitions expanded) a request's schema, "
                  "regex or GBNF may make; larger ones get 400")
      ->capture_default_str();
  cmd->add_option("--reasoning", args->reasoning,
                  "A Qwen3 reply's <think> block: separate (sent as reasoning_content) or inline "
                  "(left in the content)")
      ->capture_default_str();
  cmd->add_flag("--no-jump-forward", args->no_jump_forward,
                "Sample every token of a constrained reply, also where the grammar allows one "
                "continuation only");
  cmd->callback([&exit_code, args] { exit_code = run_serve(*args); });
}

}  // namespace trellis::cli
