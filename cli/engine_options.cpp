#include "engine_options.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "model/model_presets.h"
#include "model/synth_model.h"
#include "pipeline_runtime.h"

namespace trellis::cli {

namespace fs = std::filesystem;

void EngineOptions::add_to(CLI::App& app, bool model_required, std::vector<std::string>* models) {
  CLI::Option* m =
      models == nullptr
          ? app.add_option("-m,--model", model, "GGUF model file")
          : app.add_option("-m,--model", *models,
                           "GGUF model file; repeat as -m NAME=FILE to serve several models");
  if (model_required) m->required();
  app.add_option("-t,--threads", threads, "Threads (default: all cores)");
  app.add_option("--ctx", n_ctx, "Context length in tokens (default: the model's)");
  app.add_option("-B,--block-size", block_size, "KV cache block size in tokens")
      ->capture_default_str();
  app.add_option("--kv-type", kv_type,
                 "KV cache element type of keys and values: f16, q8_0 (0.53x the bytes), q4_0 "
                 "(0.28x) or f32")
      ->capture_default_str();
  app.add_option("--kv-type-k", kv_type_k, "The keys' type, when it differs from --kv-type");
  app.add_option("--kv-type-v", kv_type_v, "The values' type, when it differs from --kv-type");
  app.add_flag("--swa-full", swa_full,
               "Sliding-window layers (Gemma 3's local ones) keep the whole context's KV instead "
               "of their window's (implied by --cache-dir and --pipeline)");
  app.add_option("--batch-tokens", batch_tokens, "Prefill chunk size in tokens")
      ->capture_default_str();
  app.add_option("--prefix-cache", prefix_cache,
                 "Share the KV blocks of common prefixes between prompts: on or off")
      ->capture_default_str();
  app.add_option("--match", match,
                 "Prefix match granularity: token (reuse every cached token; a partially matched "
                 "block is copied) or block (whole blocks only)")
      ->capture_default_str();
  app.add_option(
         "--spec", spec,
         "Speculative decoding: on, off, or the draft sources to use, comma-separated "
         "(prefix_cache: what the cache holds after the same context; prompt_lookup: "
         "spans of the request's own prompt and output; ngram_pool: what followed the "
         "same tokens in earlier requests; draft_model: the guesses of --draft-model). Outputs "
         "are the same either way")
      ->capture_default_str();
  app.add_option("--draft-model", draft_model,
                 "With --spec: a smaller GGUF model of the same vocabulary that drafts tokens "
                 "where the cache and n-grams have none (its KV is held beside the pool's)");
  app.add_option("--spec-rows", spec_rows,
                 "With --spec: the most rows a decode step gives decode tokens and drafts "
                 "together (a lone sequence drafts up to 8 tokens; a batch shares the rows)")
      ->capture_default_str();
  app.add_option("--kv-mem", kv_mem,
                 "KV pool memory, e.g. 512MiB (B, KiB, MiB, GiB); default: 4 contexts");
  app.add_option("--kv-tokens", kv_tokens, "KV pool size in tokens (instead of --kv-mem)");
}

void EngineOptions::add_pipeline_options(CLI::App& app) {
  app.add_flag("--pipeline", pipeline,
               "Split the model's layers over the ranks of an MPI job (mpirun -np N trellis ...)");
  app.add_option("--layers-per-rank", layers_per_rank,
                 "With --pipeline: layers of each rank, e.g. 8,7,7 (default: balanced by bytes)");
  app.add_option(
      "--micro-batches", micro_batches,
      "With --pipeline: micro-batches per step (default: one per stage, fewer for steps under 32 "
      "rows per stage)");
  app.add_option("--pipeline-timeout", pipeline_timeout,
                 "With --pipeline: seconds to wait for another stage before ending the job")
      ->capture_default_str();
}

namespace {

Result<std::vector<int64_t>> parse_layer_counts(const std::string& text) {
  std::vector<int64_t> counts;
  if (text.empty()) return counts;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    char* end = nullptr;
    const long long value = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || value < 1)
      return Error{"--layers-per-rank must be positive counts such as 8,7,7, not '" + text + "'"};
    counts.push_back(value);
    at = comma + 1;
  }
  return counts;
}

// The KV type a flag names.
Result<KvType> kv_type_of(const char* flag, const std::string& name) {
  KvType type = KvType::F16;
  if (!parse_kv_type(name, &type))
    return Error{std::string(flag) + " must be f16, q8_0, q4_0 or f32, not '" + name + "'"};
  return type;
}

}  // namespace

bool EngineOptions::join_pipeline() {
  if (!pipeline) return true;
  if (model.empty()) {
    model = default_model_path();
    if (Status made = ensure_default_model(model); !made.ok()) {
      std::fprintf(stderr, "error: %s\n", made.error().message.c_str());
      return false;
    }
  }
  Result<Pipeline*> started = [&]() -> Result<Pipeline*> {
    if (micro_batches < 0 || !(pipeline_timeout > 0))
      return Error{"--micro-batches must not be negative and --pipeline-timeout must be positive"};
    Result<std::vector<int64_t>> counts = parse_layer_counts(layers_per_rank);
    if (!counts.ok()) return counts.error();
    return start_pipeline(model, threads,
                          PipelineOptions{*counts, micro_batches, pipeline_timeout});
  }();
  if (!started.ok()) {
    std::fprintf(stderr, "error: %s\n", started.error().message.c_str());
    return false;
  }
  started_pipeline_ = *started;
  return true;
}

void EngineOptions::add_disk_tier_options(CLI::App& app) {
  app.add_option("--cache-dir", cache_dir,
                 "Keep the prefix cache's evicted blocks in this directory, across restarts "
                 "(one process per directory)");
  app.add_option("--cache-disk", cache_disk,
                 "With --cache-dir: the disk budget, e.g. 20GiB (B, KiB, MiB, GiB)")
      ->capture_default_str();
}

void EngineOptions::add_scheduler_options(CLI::App& app) {
  app.add_option("--max-seqs", max_seqs, "Requests running at once (the rest wait)")
      ->capture_default_str();
  app.add_option("--schedule", schedule,
                 "Admission order: lpm (longest cached prefix first) or fcfs")
      ->capture_default_str();
  app.add_option("--max-wait", max_wait,
                 "Under lpm, steps after which a waiting request goes before younger ones")
      ->capture_default_str();
}

Result<EngineConfig> EngineOptions::engine_config() const {
  if (threads < 0 || n_ctx < 0 || block_size <= 0 || batch_tokens <= 0) {
    return Error{
        "--threads/--ctx must not be negative; --block-size/--batch-tokens must be positive"};
  }
  if (max_seqs < 1 || max_wait < 0)
    return Error{"--max-seqs must be positive and --max-wait not negative"};
  EngineConfig config;
  config.n_threads = threads;
  config.n_ctx = n_ctx;
  config.block_size = block_size;
  // --kv-type sets both; --kv-type-k / -v, when given, override one of them.
  Result<KvType> both = kv_type_of("--kv-type", kv_type);
  if (!both.ok()) return both.error();
  Result<KvType> key = kv_type_k.empty() ? both : kv_type_of("--kv-type-k", kv_type_k);
  if (!key.ok()) return key.error();
  Result<KvType> value = kv_type_v.empty() ? both : kv_type_of("--kv-type-v", kv_type_v);
  if (!value.ok()) return value.error();
  config.kv_types = KvTypes{*key, *value};
  config.swa_full = swa_full;
  if (prefix_cache != "on" && prefix_cache != "off")
    return Error{"--prefix-cache must be on or off, not '" + prefix_cache + "'"};
  config.prefix_cache.enabled = prefix_cache == "on";
  if (match == "token") {
    config.prefix_cache.mode = MatchMode::TOKEN;
  } else if (match == "block") {
    config.prefix_cache.mode = MatchMode::BLOCK;
  } else {
    return Error{"--match must be token or block, not '" + match + "'"};
  }
  Result<SpeculationConfig> speculation = parse_speculation(spec);
  if (!speculation.ok()) return Error{"--spec: " + speculation.error().message};
  config.speculation = *speculation;
  if (spec_rows < 1) return Error{"--spec-rows must be at least 1"};
  config.speculation.length.max_step_rows = spec_rows;
  if (!draft_model.empty() && !config.speculation.uses(DraftSource::DRAFT_MODEL))
    return Error{"--draft-model needs --spec on or a --spec list with draft_model"};
  if (draft_model.empty() && spec.find("draft_model") != std::string::npos)
    return Error{"--spec draft_model needs --draft-model FILE"};
  config.draft_model = draft_model;
  if (!kv_mem.empty()) {
    Result<int64_t> bytes = parse_byte_size(kv_mem);
    if (!bytes.ok()) return Error{"--kv-mem: " + bytes.error().message};
    // 0 would silently mean "the default size": a pool of no bytes is a mistake, said so.
    if (*bytes <= 0) return Error{"--kv-mem must be positive (omit it for the default pool)"};
    config.kv_bytes = *bytes;
  }
  if (kv_tokens < 0) return Error{"--kv-tokens must not be negative"};
  if (!cache_dir.empty()) {
    if (!config.prefix_cache.enabled)
      return Error{"--cache-dir is the prefix cache's disk tier: it needs --prefix-cache on"};
    Result<int64_t> bytes = parse_byte_size(cache_disk);
    if (!bytes.ok()) return Error{"--cache-disk: " + bytes.error().message};
    if (*bytes <= 0) return Error{"--cache-disk must be positive"};
    config.cache_dir = cache_dir;
    config.cache_disk_bytes = *bytes;
  }
  config.kv_tokens = kv_tokens;
  // A step holds every running request's decode token, so the batch holds at least max_seqs.
  config.scheduler.max_batch_tokens = std::max(batch_tokens, max_seqs);
  config.scheduler.max_seqs = max_seqs;
  config.scheduler.max_wait_steps = max_wait;
  if (started_pipeline_ != nullptr) {
    config.pipeline = started_pipeline_;
    // A failed stage fails the job: the other ranks are then killed at exit, not waited for.
    config.on_failure = [](const std::string&) { pipeline_failed(); };
  }
  if (schedule == "lpm") {
    config.scheduler.policy = SchedulePolicy::LPM;
  } else if (schedule == "fcfs") {
    config.scheduler.policy = SchedulePolicy::FCFS;
  } else {
    return Error{"--schedule must be lpm or fcfs, not '" + schedule + "'"};
  }
  return config;
}

std::unique_ptr<Engine> EngineOptions::open_engine(FunctionRef<void(EngineConfig&)> adjust) {
  if (model.empty()) model = default_model_path();
  Result<EngineConfig> built = engine_config();
  if (!built.ok()) {
    std::fprintf(stderr, "error: %s\n", built.error().message.c_str());
    return nullptr;
  }
  adjust(*built);
  // A run that turns the cache off (a benchmark's baseline) has no use for its disk tier.
  if (!built->prefix_cache.enabled) built->cache_dir.clear();
  Result<std::unique_ptr<Engine>> engine = Engine::create(model, *built);
  if (!engine.ok()) {
    std::fprintf(stderr, "error: %s\n", engine.error().message.c_str());
    return nullptr;
  }
  return std::move(engine).value();
}

void print_streamed(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

Status ensure_default_model(const std::string& path) {
  if (fs::exists(path)) return {};
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return Error{path + ": cannot create its directory: " + ec.message()};
  std::fprintf(stderr, "creating the default model %s (once)\n", path.c_str());
  // Several processes may create it at once (the ranks of a pipeline): each writes its own file.
  const std::string partial = path + ".partial." + std::to_string(::getpid());
  SynthOptions options{*find_model_preset("tinyllama-1.1b"), DType::Q4_0, 0, "", partial, 0, true};
  TRELLIS_TRY(synthesize_model(options));
  fs::rename(partial, path, ec);  // the model appears only when complete
  if (ec) return Error{path + ": cannot move the new model in place: " + ec.message()};
  return {};
}

std::string default_model_path() {
  fs::path dir;
  if (const char* env = std::getenv("TRELLIS_CACHE_DIR")) {
    dir = env;
  } else if (const char* xdg = std::getenv("XDG_CACHE_HOME")) {
    dir = fs::path(xdg) / "trellis";
  } else if (const char* home = std::getenv("HOME")) {
    dir = fs::path(home) / ".cache" / "trellis";
  } else {
    dir = fs::temp_directory_path() / "trellis-cache";
  }
  return (dir / "tinyllama-1.1b-q4_0.gguf").string();
}

}  // namespace trellis::cli
