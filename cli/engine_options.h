// Options shared by the subcommands that run the model: the engine's configuration as flags.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/function_ref.h"
#include "engine/engine.h"

namespace trellis::cli {

struct EngineOptions {
  std::string model;
  int threads = 0;
  int32_t n_ctx = 0;
  int32_t block_size = 32;
  std::string kv_type = "f16";
  std::string kv_type_k;  // empty: --kv-type
  std::string kv_type_v;
  bool swa_full = false;
  int32_t batch_tokens = 256;
  std::string prefix_cache = "on";
  std::string spec = "on";
  int32_t spec_rows = SpeculationConfig{}.length.max_step_rows;
  std::string draft_model;
  std::string match = "token";
  std::string kv_mem;  // a size such as 512MiB; empty: --kv-tokens or the default
  int64_t kv_tokens = 0;
  int32_t max_seqs = 16;
  std::string schedule = "lpm";
  int64_t max_wait = 64;
  // --pipeline: the layers split over the ranks of an MPI job.
  bool pipeline = false;
  std::string layers_per_rank;  // "8,7,7"; empty: balanced by weight bytes
  int32_t micro_batches = 0;
  double pipeline_timeout = 60;
  Pipeline* started_pipeline_ = nullptr;  // set by join_pipeline
  // --cache-dir: the prefix cache's disk tier (empty: none), with its --cache-disk budget.
  std::string cache_dir;
  std::string cache_disk = "20GiB";

  // Registers -m, -t, --ctx, --block-size, --kv-type, --batch-tokens, --prefix-cache, --match,
  // --spec, --kv-mem and --kv-tokens on `app`. With `models`, -m may be repeated and fills it
  // instead of `model` (the command decides what its values mean).
  void add_to(CLI::App& app, bool model_required, std::vector<std::string>* models = nullptr);
  // Registers --pipeline, --layers-per-rank, --micro-batches and --pipeline-timeout (a command
  // that does calls join_pipeline before anything else).
  void add_pipeline_options(CLI::App& app);
  // Registers --cache-dir and --cache-disk (the prefix cache's disk tier).
  void add_disk_tier_options(CLI::App& app);
  // Registers --max-seqs, --schedule and --max-wait (the scheduler's).
  void add_scheduler_options(CLI::App& app);
  // The config, or an error for a bad value.
  Result<EngineConfig> engine_config() const;
  // With --pipeline, joins the MPI job before the command does anything else: on rank 0 it
  // returns (true, or false after printing an error) and engine_config() then runs on the
  // pipeline; on the other ranks it runs their stage and exits the process.
  bool join_pipeline();
  // Builds the engine for `model` (the default model when empty) from these options, after
  // `adjust` had a chance to change the config; prints the error and returns null on failure.
  std::unique_ptr<Engine> open_engine(FunctionRef<void(EngineConfig&)> adjust);
  std::unique_ptr<Engine> open_engine() {
    return open_engine([](EngineConfig&) {});
  }
};

// Writes generated text to stdout at once (streaming output).
void print_streamed(std::string_view text);

// The default model's path (created by `trellis demo` when missing).
std::string default_model_path();
// Creates the default model (tinyllama-1.1b-shaped, q4_0, synthetic weights) at `path` when no file
// is there yet.
Status ensure_default_model(const std::string& path);

}  // namespace trellis::cli
