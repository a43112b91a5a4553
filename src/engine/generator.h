// Runs prompts one after another through one model, one KV cache and one thread pool: the engine
// behind `trellis generate`, `trellis logits` and `trellis bench speed`. (The concurrent,
// cache-sharing engine builds on the same parts.)
#pragma once

#include <cstdint>
#include <memory>
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
#include "sample/sampling_params.h"
#include "tokenizer/tokenizer.h"

namespace trellis {

struct GeneratorConfig {
  int n_threads = 0;        // 0: all cores
  int32_t block_size = 32;  // KV tokens per block
  KvType kv_type = KvType::F16;
  int32_t n_ctx = 0;               // tokens per sequence; 0: the model's training context
  int32_t max_batch_tokens = 256;  // prefill chunk size (workspace rows)
};

struct GenerationRequest {
  std::vector<TokenId> prompt;  // already tokenized, BOS included when wanted
  SamplingParams sampling;
  int32_t max_tokens = 128;
  std::vector<std::string> stop;  // stop strings: generation ends before the first one
  bool ignore_eos = false;
};

struct GenerationTimings {
  int32_t n_prompt_tokens = 0;
  int32_t n_generated_tokens = 0;
  double prompt_ms = 0;      // prefill, up to and including the first sampled token
  double generation_ms = 0;  // the decode steps after the first token
  double ttft_ms = 0;        // request start to first token
  double prompt_tokens_per_s() const;
  double generation_tokens_per_s() const;
};

struct GenerationResult {
  std::vector<TokenId> tokens;
  std::string text;
  std::string finish_reason;  // "stop" (end-of-generation token or stop string) or "length"
  GenerationTimings timings;
};

class Generator {
 public:
  static Result<std::unique_ptr<Generator>> create(const std::string& model_path,
                                                   const GeneratorConfig& config);

  // Generates after the prompt, calling on_text with each piece of text as it becomes valid UTF-8.
  // Errors: empty prompt, prompt longer than the context, bad sampling parameters.
  Result<GenerationResult> generate(const GenerationRequest& request,
                                    FunctionRef<void(std::string_view)> on_text);

  // Logits of the prompt's positions: all of them or only the last ([positions][n_vocab]).
  Result<std::vector<std::vector<float>>> prompt_logits(const std::vector<TokenId>& prompt,
                                                        bool all_positions);

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const LlamaModel& model() const { return *model_; }
  const GgufFile& file() const { return *file_; }
  int32_t n_ctx() const { return n_ctx_; }
  int n_threads() const { return pool_->size(); }
  size_t kv_bytes() const { return kv_->bytes(); }

 private:
  Generator() = default;
  Status check_prompt(const std::vector<TokenId>& prompt) const;
  // Runs `n` tokens starting at `first_position` (a prefill chunk or one decode token) and, when
  // logits != nullptr, stores the logits of the last (or of every, when all_rows) token.
  void run(const TokenId* ids, int32_t n, int32_t first_position, float* logits, bool all_rows);

  std::unique_ptr<GgufFile> file_;
  std::unique_ptr<LlamaModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<KvStorage> kv_;
  std::unique_ptr<LlamaWorkspace> workspace_;
  std::vector<int32_t> block_table_;  // the one sequence's blocks: all of the pool
  ForwardBatch batch_;
  int32_t n_ctx_ = 0;
  int32_t max_batch_tokens_ = 0;
};

}  // namespace trellis
