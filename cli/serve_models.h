// `trellis serve` with several models (server/model_hub.h): which models a command line names
// (repeated -m NAME=FILE, --models-dir DIR) and how each is loaded (an engine with the serve
// flags, or an embedder for an embedding or reranking file).
#pragma once

#include <string>
#include <vector>

#include "engine_options.h"
#include "server/model_hub.h"
#include "server/server_config.h"

namespace trellis::cli {

// The file name without its directory and ".gguf": a model's default name.
std::string model_name_of(const std::string& path);

// True when the -m values and --models-dir ask for the hub rather than one model: a directory, a
// NAME=FILE, or more than one -m.
bool wants_model_hub(const std::vector<std::string>& model_args, const std::string& models_dir);

// The models of -m values (NAME=FILE, or a plain FILE named after itself) and the .gguf files
// of `models_dir` (not recursive, sorted by name). Errors: a missing file, an empty directory, a
// name given twice, a name that is empty or has characters other than letters, digits and . _ - :.
// expected_bytes: the file's size plus `kv_bytes` (the KV pool's budget when known, else 0).
Result<std::vector<HubModel>> hub_models(const std::vector<std::string>& model_args,
                                         const std::string& models_dir, int64_t kv_bytes);

// Loads a model of the hub: `options` (with its model replaced by the file; a disk tier in a
// subdirectory named after the model) and `server` (its model_id replaced by the name).
// `adjust` may change each engine's config (as EngineOptions::open_engine's does).
ModelLoader hub_loader(EngineOptions options, ServerConfig server,
                       std::function<void(EngineConfig&)> adjust);

}  // namespace trellis::cli
