#include "engine/generator.h"

#include <algorithm>
#include <chrono>

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
  return prompt_ms > 0 ? n_prompt_tokens * 1000.0 / prompt_ms : 0.0;
}
double GenerationTimings::generation_tokens_per_s() const {
  // The first token comes out of the prefill; the decode steps produce the rest.
  return generation_ms > 0 ? (n_generated_tokens - 1) * 1000.0 / generation_ms : 0.0;
}

Result<std::unique_ptr<Generator>> Generator::create(const std::string& model_path,
                                                     const GeneratorConfig& config) {
  auto gen = std::unique_ptr<Generator>(new Generator());
  Result<GgufFile> file = GgufFile::open(model_path);
  if (!file.ok()) return file.error();
  gen->file_ = std::make_unique<GgufFile>(std::move(file).value());
  Result<std::unique_ptr<LlamaModel>> model = LlamaModel::load(*gen->file_);
  if (!model.ok()) return model.error();
  gen->model_ = std::move(model).value();
  Result<Vocab> vocab = load_vocab(*gen->file_);
  if (!vocab.ok()) return vocab.error();
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::create(std::move(vocab).value());
  if (!tokenizer.ok()) return tokenizer.error();
  gen->tokenizer_ = std::move(tokenizer).value();
  if (gen->tokenizer_->vocab().size() != gen->model_->hparams().n_vocab) {
    return Error{
        model_path + ": the tokenizer has " + std::to_string(gen->tokenizer_->vocab().size()) +
        " tokens but the model's vocab is " + std::to_string(gen->model_->hparams().n_vocab)};
  }

  const LlamaHParams& hp = gen->model_->hparams();
  gen->n_ctx_ = config.n_ctx > 0 ? config.n_ctx : static_cast<int32_t>(hp.n_ctx_train);
  if (config.block_size <= 0 || config.max_batch_tokens <= 0)
    return Error{"block size and batch size must be positive"};
  const int32_t n_blocks = (gen->n_ctx_ + config.block_size - 1) / config.block_size;
  Result<KvStorage> kv =
      KvStorage::create(gen->model_->kv_layout(config.block_size, config.kv_type), n_blocks);
  if (!kv.ok()) return kv.error();
  gen->kv_ = std::make_unique<KvStorage>(std::move(kv).value());
  // One sequence at a time: it may use every block, in order.
  BlockPool pool(n_blocks);
  pool.alloc(n_blocks, gen->block_table_);
  gen->max_batch_tokens_ = std::min(config.max_batch_tokens, gen->n_ctx_);
  gen->workspace_ = std::make_unique<LlamaWorkspace>(hp, gen->max_batch_tokens_);
  gen->pool_ = std::make_unique<ThreadPool>(
      config.n_threads > 0 ? config.n_threads : ThreadPool::default_thread_count());
  return gen;
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

void Generator::run(const TokenId* ids, int32_t n, int32_t first_position, float* logits,
                    bool all_rows) {
  batch_.clear();
  batch_.add_sequence(ids, n, first_position, block_table_,
                      /*want_last_logits=*/!all_rows && logits != nullptr);
  if (all_rows && logits != nullptr) {
    for (int32_t r = 0; r < n; ++r) batch_.output_rows.push_back(r);
  }
  model_->forward(batch_, *kv_, *workspace_, *pool_, logits);
}

Result<GenerationResult> Generator::generate(const GenerationRequest& request,
                                             FunctionRef<void(std::string_view)> on_text) {
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
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  std::vector<TokenId> history = request.prompt;
  const auto n_prompt = static_cast<int32_t>(request.prompt.size());
  result.timings.n_prompt_tokens = n_prompt;
  if (request.max_tokens == 0) return result;

  for (int32_t begin = 0; begin < n_prompt; begin += max_batch_tokens_) {
    const int32_t n = std::min(max_batch_tokens_, n_prompt - begin);
    const bool last_chunk = begin + n == n_prompt;
    run(request.prompt.data() + begin, n, begin, last_chunk ? logits.data() : nullptr, false);
  }
  StopMatcher stop(condition, *tokenizer_);
  Clock::time_point decode_start;
  auto emit = [&](const StopMatcher::Step& step) {
    if (step.text.empty()) return;
    result.text += step.text;
    on_text(step.text);
  };
  for (;;) {
    const TokenId next = sampler->sample(logits, history);
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
    if (step.finished()) break;
    const auto position = static_cast<int32_t>(history.size()) - 1;
    if (position + 1 > n_ctx_) {  // the context is full
      emit(stop.finish(FinishReason::LENGTH));
      break;
    }
    run(&history.back(), 1, position, logits.data(), false);
  }
  result.finish_reason = std::string(finish_reason_name(stop.finish_reason()));
  result.timings.n_generated_tokens = static_cast<int32_t>(result.tokens.size());
  if (!result.tokens.empty()) result.timings.generation_ms = ms_since(decode_start);
  return result;
}

Result<std::vector<std::vector<float>>> Generator::prompt_logits(const std::vector<TokenId>& prompt,
                                                                 bool all_positions) {
  TRELLIS_TRY(check_prompt(prompt));
  const auto n_vocab = static_cast<size_t>(model_->hparams().n_vocab);
  const auto n_prompt = static_cast<int32_t>(prompt.size());
  std::vector<std::vector<float>> out;
  std::vector<float> chunk_logits(static_cast<size_t>(max_batch_tokens_) * n_vocab);
  for (int32_t begin = 0; begin < n_prompt; begin += max_batch_tokens_) {
    const int32_t n = std::min(max_batch_tokens_, n_prompt - begin);
    const bool last_chunk = begin + n == n_prompt;
    if (all_positions) {
      run(prompt.data() + begin, n, begin, chunk_logits.data(), true);
      for (int32_t r = 0; r < n; ++r) {
        out.emplace_back(chunk_logits.begin() + static_cast<ptrdiff_t>(r * n_vocab),
                         chunk_logits.begin() + static_cast<ptrdiff_t>((r + 1) * n_vocab));
      }
    } else {
      run(prompt.data() + begin, n, begin, last_chunk ? chunk_logits.data() : nullptr, false);
      if (last_chunk)
        out.emplace_back(chunk_logits.begin(),
                         chunk_logits.begin() + static_cast<ptrdiff_t>(n_vocab));
    }
  }
  return out;
}

}  // namespace trellis
