#include "engine/generator.h"

#include <algorithm>
#include <cassert>
#include <chrono>

#include "engine/model_runtime.h"
#include "sample/sampler.h"
#include "sample/stop_matcher.h"

namespace trellis {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

double GenerationTimings::prompt_tokens_per_s() const {
  return prompt_ms > 0 ? n_prefill_tokens * 1000.0 / prompt_ms : 0.0;
}
double GenerationTimings::generation_tokens_per_s() const {
  // The first token comes out of the prefill; the decode steps produce the rest.
  return generation_ms > 0 ? (n_generated_tokens - 1) * 1000.0 / generation_ms : 0.0;
}

Result<std::unique_ptr<Generator>> Generator::create(const std::string& model_path,
                                                     const GeneratorConfig& config) {
  auto gen = std::unique_ptr<Generator>(new Generator());
  Result<LoadedModel> loaded = load_model(model_path);
  if (!loaded.ok()) return loaded.error();
  gen->file_ = std::move(loaded->file);
  gen->model_ = std::move(loaded->model);
  gen->tokenizer_ = std::move(loaded->tokenizer);

  const LlamaHParams& hp = gen->model_->hparams();
  gen->n_ctx_ = config.n_ctx > 0 ? config.n_ctx : static_cast<int32_t>(hp.n_ctx_train);
  if (config.block_size <= 0 || config.max_batch_tokens <= 0)
    return Error{"block size and batch size must be positive"};
  TRELLIS_TRY(gen->init_kv(config));
  gen->max_batch_tokens_ = std::min(config.max_batch_tokens, gen->n_ctx_);
  gen->workspace_ = std::make_unique<LlamaWorkspace>(hp, gen->max_batch_tokens_);
  gen->threads_ = std::make_unique<ThreadPool>(
      config.n_threads > 0 ? config.n_threads : ThreadPool::default_thread_count());
  return gen;
}

Status Generator::init_kv(const GeneratorConfig& config) {
  Result<KvRuntime> runtime =
      create_kv_runtime(*model_, config.block_size, config.kv_type, n_ctx_, config.kv_bytes,
                        config.kv_tokens, config.prefix_cache);
  if (!runtime.ok()) return runtime.error();
  n_ctx_ = runtime->n_ctx;
  kv_ = std::move(runtime->kv);
  blocks_ = std::move(runtime->blocks);
  cache_ = std::move(runtime->cache);
  return {};
}

Status Generator::check_prompt(const std::vector<TokenId>& prompt) const {
  if (prompt.empty()) return Error{"the prompt is empty (no tokens)"};
  if (static_cast<int32_t>(prompt.size()) > n_ctx_) {
    return Error{"the prompt has " + std::to_string(prompt.size()) +
                 " tokens, more than the context of " + std::to_string(n_ctx_)};
  }
  for (TokenId id : prompt) {
    if (id < 0 || id >= model_->hparams().n_vocab)
      return Error{"token id " + std::to_string(id) + " is outside the vocab"};
  }
  return {};
}

void Generator::run(const SequenceKv& seq, const TokenId* ids, int32_t n, int32_t first_position,
                    float* logits, bool all_rows) {
  assert(first_position + n <= seq.capacity_tokens());
  batch_.clear();
  batch_.add_sequence(ids, n, first_position, seq.block_table(),
                      /*want_last_logits=*/!all_rows && logits != nullptr);
  if (all_rows && logits != nullptr) {
    for (int32_t r = 0; r < n; ++r) batch_.output_rows.push_back(r);
  }
  model_->forward(batch_, *kv_, *workspace_, *threads_, logits);
}

void Generator::prefill(const SequenceKv& seq, std::span<const TokenId> prompt, int32_t first,
                        float* logits) {
  const auto n_prompt = static_cast<int32_t>(prompt.size());
  for (int32_t begin = first; begin < n_prompt; begin += max_batch_tokens_) {
    const int32_t n = std::min(max_batch_tokens_, n_prompt - begin);
    const bool last_chunk = begin + n == n_prompt;
    run(seq, prompt.data() + begin, n, begin, last_chunk ? logits : nullptr, false);
  }
}

Result<GenerationResult> Generator::generate(const GenerationRequest& request,
                                             FunctionRef<bool(std::string_view)> on_text) {
  TRELLIS_TRY(check_prompt(request.prompt));
  if (request.max_tokens < 0) return Error{"max_tokens must not be negative"};
  const int32_t n_vocab = static_cast<int32_t>(model_->hparams().n_vocab);
  Result<Sampler> sampler = Sampler::create(request.sampling, n_vocab);
  if (!sampler.ok()) return sampler.error();

  StopCondition condition;
  const TokenId eos = tokenizer_->vocab().eos_id;
  if (!request.ignore_eos && eos != kNoToken) condition.stop_token_ids.push_back(eos);
  condition.max_tokens = request.max_tokens;
  condition.stop_strings = request.stop;
  TRELLIS_TRY(condition.validate());

  const Clock::time_point start = Clock::now();
  GenerationResult result;
  result.finish_reason = "length";
  const auto n_prompt = static_cast<int32_t>(request.prompt.size());
  result.timings.n_prompt_tokens = n_prompt;
  if (request.max_tokens == 0) return result;

  // Prepare (the match has no side effects), then commit: lock the matched prefix, share its
  // blocks, allocate the rest. `seq` releases every block it holds on every way out.
  const PrefixMatch match = cache_->match(request.cache_namespace, request.prompt);
  Result<SequenceKv> admitted = cache_->admit(request.cache_namespace, match, n_prompt);
  if (!admitted.ok()) return admitted.error();
  SequenceKv seq = std::move(admitted).value();

  result.timings.n_prefill_tokens = n_prompt - match.n_tokens;
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  prefill(seq, request.prompt, match.n_tokens, logits.data());
  cache_->insert(seq, request.prompt, /*finished=*/false);

  // history = prompt + generated tokens; the KV of history[0, n_kv) is written.
  std::vector<TokenId> history = request.prompt;
  int32_t n_kv = n_prompt;
  StopMatcher stop(condition, *tokenizer_);
  Clock::time_point decode_start;
  bool cancelled = false;
  auto emit = [&](const StopMatcher::Step& step) {
    if (step.text.empty() || cancelled) return;
    result.text += step.text;
    cancelled = !on_text(step.text);
  };
  for (;;) {
    const TokenId next = sampler->sample(logits, history);
    if (request.return_logits) result.logits.push_back(logits);
    if (result.tokens.empty() && result.timings.ttft_ms == 0) {
      result.timings.ttft_ms = ms_since(start);
      result.timings.prompt_ms = result.timings.ttft_ms;
      decode_start = Clock::now();
    }
    const StopMatcher::Step step = stop.push(next);
    if (!condition.is_stop_token(next)) {
      result.tokens.push_back(next);
      history.push_back(next);
    }
    emit(step);
    if (cancelled || step.finished()) break;
    // The context or the pool is full: a pool of at least one context (see init_kv) runs out
    // only at the context's end, since nothing else runs meanwhile.
    const int32_t position = n_kv;
    if (position + 1 > n_ctx_ || !cache_->reserve(seq, position + 1).ok()) {
      emit(stop.finish(FinishReason::LENGTH));
      break;
    }
    run(seq, &history.back(), 1, position, logits.data(), false);
    n_kv = position + 1;
  }
  // Cache prompt + output (the last sampled token has no KV), so that a follow-up that extends
  // this conversation reuses all of it.
  cache_->insert(seq, std::span<const TokenId>(history).first(static_cast<size_t>(n_kv)),
                 /*finished=*/true);
  result.kv = KvUsage{seq.n_cached_tokens(), seq.n_blocks_allocated(), seq.n_blocks_acquired()};
  result.finish_reason =
      cancelled ? "cancelled" : std::string(finish_reason_name(stop.finish_reason()));
  result.timings.n_generated_tokens = static_cast<int32_t>(result.tokens.size());
  if (!result.tokens.empty()) result.timings.generation_ms = ms_since(decode_start);
  return result;
}

Result<std::vector<std::vector<float>>> Generator::prompt_logits(const std::vector<TokenId>& prompt,
                                                                 bool all_positions) {
  TRELLIS_TRY(check_prompt(prompt));
  const auto n_vocab = static_cast<size_t>(model_->hparams().n_vocab);
  const auto n_prompt = static_cast<int32_t>(prompt.size());
  Result<SequenceKv> admitted = cache_->admit("", PrefixMatch{}, n_prompt);
  if (!admitted.ok()) return admitted.error();
  const SequenceKv seq = std::move(admitted).value();
  std::vector<std::vector<float>> out;
  std::vector<float> chunk_logits(static_cast<size_t>(max_batch_tokens_) * n_vocab);
  if (!all_positions) {
    prefill(seq, prompt, 0, chunk_logits.data());
    out.emplace_back(chunk_logits.begin(), chunk_logits.begin() + static_cast<ptrdiff_t>(n_vocab));
    return out;
  }
  for (int32_t begin = 0; begin < n_prompt; begin += max_batch_tokens_) {
    const int32_t n = std::min(max_batch_tokens_, n_prompt - begin);
    run(seq, prompt.data() + begin, n, begin, chunk_logits.data(), true);
    for (int32_t r = 0; r < n; ++r) {
      out.emplace_back(chunk_logits.begin() + static_cast<ptrdiff_t>(r * n_vocab),
                       chunk_logits.begin() + static_cast<ptrdiff_t>((r + 1) * n_vocab));
    }
  }
  return out;
}

}  // namespace trellis
