// Runs prompts one after another through one model, one KV block pool with its prefix cache, and
// one thread pool: the engine behind `trellis generate`, `trellis logits` and `trellis bench
// speed`. A later prompt that shares a prefix with an earlier one (or with its output) reuses the
// cached KV blocks of that prefix and prefills only the rest. (The concurrent engine builds on the
// same parts.)
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/function_ref.h"
#include "base/result.h"
#include "base/thread_pool.h"
#include "gguf/gguf_file.h"
#include "kv/block_pool.h"
#include "kv/kv_storage.h"
#include "model/llama_model.h"
#include "prefix/prefix_cache.h"
#include "sample/sampling_params.h"
#include "tokenizer/tokenizer.h"

namespace trellis {

struct GeneratorConfig {
  int n_threads = 0;        // 0: all cores
  int32_t block_size = 32;  // KV tokens per block
  KvType kv_type = KvType::F16;
  int32_t n_ctx = 0;               // tokens per sequence; 0: the model's training context
  int32_t max_batch_tokens = 256;  // prefill chunk size (workspace rows)
  PrefixCacheConfig prefix_cache;  // on, TOKEN mode by default
  // The pool's size: a memory budget in bytes, else a token count, else (both 0) four contexts.
  // A pool smaller than one context plus a block shortens the context to fit, so that one request
  // always fits once the cache is evicted.
  int64_t kv_bytes = 0;
  int64_t kv_tokens = 0;
};

struct GenerationRequest {
  std::vector<TokenId> prompt;  // already tokenized, BOS included when wanted
  SamplingParams sampling;
  int32_t max_tokens = 128;
  std::vector<std::string> stop;  // stop strings: generation ends before the first one
  bool ignore_eos = false;
  std::string cache_namespace;  // prefixes are shared only inside a namespace; "" is everyone's
  bool return_logits = false;   // keep the logits each token was sampled from (tests, logprobs)
};

// What one request took from the KV pool.
struct KvUsage {
  int32_t n_cached_tokens = 0;     // prompt tokens served from the prefix cache
  int32_t n_blocks_allocated = 0;  // fresh blocks (copies of a partially matched block included)
  int32_t n_blocks_acquired = 0;   // cached blocks shared (refcount + 1)
};

struct GenerationTimings {
  int32_t n_prompt_tokens = 0;
  int32_t n_prefill_tokens = 0;  // prompt tokens computed: those the prefix cache did not serve
  int32_t n_generated_tokens = 0;
  double prompt_ms = 0;                // prefill, up to and including the first sampled token
  double generation_ms = 0;            // the decode steps after the first token
  double ttft_ms = 0;                  // request start to first token
  double prompt_tokens_per_s() const;  // prefill tokens per second
  double generation_tokens_per_s() const;
};

struct GenerationResult {
  std::vector<TokenId> tokens;
  std::string text;
  // "stop" (end-of-generation token or stop string), "length" (max_tokens, the context or the KV
  // pool is full) or "cancelled" (on_text asked to stop).
  std::string finish_reason;
  GenerationTimings timings;
  KvUsage kv;
  std::vector<std::vector<float>> logits;  // [sampled token][n_vocab] when return_logits
};

class Generator {
 public:
  static Result<std::unique_ptr<Generator>> create(const std::string& model_path,
                                                   const GeneratorConfig& config);

  // Generates after the prompt, calling on_text with each piece of text as it becomes valid UTF-8;
  // on_text returns false to cancel (the request ends at once, finish_reason "cancelled").
  // The request's lifecycle: match the prompt in the prefix cache, share the matched blocks,
  // allocate the rest, prefill the unmatched suffix only, cache the prompt's whole blocks, decode,
  // cache prompt + output, release every block (on every path, errors included).
  // Errors: empty prompt, prompt longer than the context, bad sampling parameters, a KV pool too
  // full for the prompt.
  Result<GenerationResult> generate(const GenerationRequest& request,
                                    FunctionRef<bool(std::string_view)> on_text);

  // Logits of the prompt's positions: all of them or only the last ([positions][n_vocab]).
  // Computes every position (no prefix cache) and caches nothing.
  Result<std::vector<std::vector<float>>> prompt_logits(const std::vector<TokenId>& prompt,
                                                        bool all_positions);

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const LlamaModel& model() const { return *model_; }
  const GgufFile& file() const { return *file_; }
  int32_t n_ctx() const { return n_ctx_; }
  int n_threads() const { return threads_->size(); }
  size_t kv_bytes() const { return kv_->bytes(); }
  const BlockPool& block_pool() const { return *blocks_; }
  const PrefixCache& prefix_cache() const { return *cache_; }
  // Evicts every cached prefix; afterwards all blocks are free (no request runs between calls).
  int32_t flush_cache() { return cache_->flush(); }

 private:
  Generator() = default;
  Status check_prompt(const std::vector<TokenId>& prompt) const;
  Status init_kv(const GeneratorConfig& config);
  // Runs `n` tokens of `seq` starting at `first_position` (a prefill chunk or one decode token)
  // and, when logits != nullptr, stores the logits of the last (or of every, when all_rows) token.
  // Precondition: seq covers first_position + n positions.
  void run(const SequenceKv& seq, const TokenId* ids, int32_t n, int32_t first_position,
           float* logits, bool all_rows);
  // Prefills prompt[first, n) in chunks; the last chunk's last logits go to `logits`.
  void prefill(const SequenceKv& seq, std::span<const TokenId> prompt, int32_t first,
               float* logits);

  std::unique_ptr<GgufFile> file_;
  std::unique_ptr<LlamaModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ThreadPool> threads_;
  std::unique_ptr<KvStorage> kv_;
  std::unique_ptr<BlockPool> blocks_;
  std::unique_ptr<PrefixCache> cache_;  // declared after blocks_ and kv_: destroyed before them
  std::unique_ptr<LlamaWorkspace> workspace_;
  ForwardBatch batch_;
  int32_t n_ctx_ = 0;
  int32_t max_batch_tokens_ = 0;
};

}  // namespace trellis
