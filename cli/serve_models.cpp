#include "serve_models.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

#include "embed/embedder.h"
#include "gguf/gguf_file.h"
#include "server/embedding_service.h"
#include "server/openai_service.h"

namespace trellis::cli {

namespace fs = std::filesystem;

std::string model_name_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.size() > 5 && name.ends_with(".gguf")) name.resize(name.size() - 5);
  return name;
}

namespace {

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
         c == ':';
}

// "NAME=FILE" split; a value without '=' (or whose '=' is inside a directory name) is a FILE.
std::pair<std::string, std::string> split_model_arg(const std::string& arg) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || arg.find('/') < eq) return {model_name_of(arg), arg};
  return {arg.substr(0, eq), arg.substr(eq + 1)};
}

Status check_name(const std::string& name, const std::string& from) {
  if (name.empty()) return Error{from + ": the model name is empty"};
  for (char c : name) {
    if (!is_name_char(c)) {
      return Error{from + ": the model name '" + name +
                   "' may hold only letters, digits and . _ - :"};
    }
  }
  return {};
}

// What a file is for, from its metadata; empty when it cannot be read (its load will say why).
std::string kind_of(const std::string& path) {
  Result<GgufFile> file = GgufFile::open(path);
  if (!file.ok()) return "";
  return is_embedding_file(*file) ? "embedding" : "generation";
}

}  // namespace

bool wants_model_hub(const std::vector<std::string>& model_args, const std::string& models_dir) {
  if (!models_dir.empty() || model_args.size() > 1) return true;
  return model_args.size() == 1 && split_model_arg(model_args[0]).second != model_args[0];
}

Result<std::vector<HubModel>> hub_models(const std::vector<std::string>& model_args,
                                         const std::string& models_dir, int64_t kv_bytes) {
  std::vector<std::pair<std::string, std::string>> named;  // (name, file)
  for (const std::string& arg : model_args) named.push_back(split_model_arg(arg));
  if (!models_dir.empty()) {
    std::error_code ec;
    if (!fs::is_directory(models_dir, ec))
      return Error{"--models-dir " + models_dir + ": not a directory"};
    std::vector<std::string> files;
    for (const fs::directory_entry& entry : fs::directory_iterator(models_dir, ec)) {
      const std::string file = entry.path().filename().string();
      if (file.ends_with(".gguf") && !file.starts_with(".") && entry.is_regular_file(ec))
        files.push_back(entry.path().string());
    }
    if (ec) return Error{"--models-dir " + models_dir + ": " + ec.message()};
    if (files.empty()) return Error{"--models-dir " + models_dir + ": no .gguf files there"};
    std::sort(files.begin(), files.end());
    for (const std::string& file : files) named.emplace_back(model_name_of(file), file);
  }
  std::map<std::string, std::string> seen;
  std::vector<HubModel> models;
  for (const auto& [name, file] : named) {
    TRELLIS_TRY(check_name(name, file));
    if (auto [it, added] = seen.emplace(name, file); !added)
      return Error{"the model name '" + name + "' is given twice (" + it->second + ", " + file + ")"};
    std::error_code ec;
    const uintmax_t size = fs::file_size(file, ec);
    if (ec) return Error{file + ": " + ec.message()};
    models.push_back({name, file, static_cast<int64_t>(size) + kv_bytes, kind_of(file)});
  }
  return models;
}

namespace {

Result<ServedModel> load_embedding_model(const HubModel& model, const EngineOptions& options,
                                         ServerConfig server) {
  const int32_t batch_tokens = std::max(options.batch_tokens, 2048);
  Result<std::unique_ptr<Embedder>> embedder = Embedder::open(
      model.path, EmbedderOptions{.n_threads = options.threads, .max_batch_tokens = batch_tokens});
  if (!embedder.ok()) return embedder.error();
  server.chat_page = false;
  ServedModel loaded;
  loaded.kind = (*embedder)->is_reranker() ? "rerank" : "embedding";
  loaded.api = std::make_unique<EmbeddingService>(**embedder, server, batch_tokens);
  loaded.owner = std::shared_ptr<Embedder>(std::move(embedder).value());
  loaded.endpoints = EmbeddingService::endpoints();
  loaded.memory_bytes = static_cast<int64_t>(fs::file_size(model.path));
  return loaded;
}

Result<ServedModel> load_generation_model(const HubModel& model, EngineOptions options,
                                          const ServerConfig& server,
                                          const std::function<void(EngineConfig&)>& adjust) {
  options.model = model.path;
  if (!options.cache_dir.empty()) options.cache_dir = options.cache_dir + "/" + model.name;
  Result<EngineConfig> config = options.engine_config();
  if (!config.ok()) return config.error();
  if (adjust) adjust(*config);
  Result<std::unique_ptr<Engine>> engine = Engine::create(model.path, *config);
  if (!engine.ok()) return engine.error();
  auto service = std::make_unique<OpenAiService>(**engine, server);
  if (const std::string& why = service->chat_template_warning(); !why.empty())
    std::fprintf(stderr, "warning: %s: %s\n", model.name.c_str(), why.c_str());
  ServedModel loaded;
  loaded.kind = "generation";
  loaded.memory_bytes =
      static_cast<int64_t>(fs::file_size(model.path)) + static_cast<int64_t>((*engine)->kv_bytes());
  loaded.api = std::move(service);
  loaded.owner = std::shared_ptr<Engine>(std::move(engine).value());
  loaded.endpoints = OpenAiService::endpoints();
  return loaded;
}

}  // namespace

ModelLoader hub_loader(EngineOptions options, ServerConfig server,
                       std::function<void(EngineConfig&)> adjust) {
  return [options, server, adjust](const HubModel& model) -> Result<ServedModel> {
    const auto start = std::chrono::steady_clock::now();
    ServerConfig config = server;
    config.model_id = model.name;
    Result<GgufFile> file = GgufFile::open(model.path);
    if (!file.ok()) return file.error();
    const bool embeds = is_embedding_file(*file);
    Result<ServedModel> loaded = embeds ? load_embedding_model(model, options, config)
                                        : load_generation_model(model, options, config, adjust);
    if (!loaded.ok()) {
      std::fprintf(stderr, "model %s: %s\n", model.name.c_str(), loaded.error().message.c_str());
      return loaded;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "loaded %s (%s, %lld MiB) in %.1f s\n", model.name.c_str(),
                 loaded->kind.c_str(), static_cast<long long>(loaded->memory_bytes >> 20),
                 seconds);
    return loaded;
  };
}

}  // namespace trellis::cli
