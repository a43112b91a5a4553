#include "engine/engine.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <future>
#include <numeric>
#include <optional>

#include "engine/model_runtime.h"
#include "sample/rng.h"
#include "sample/sampler.h"
#include "sample/stop_matcher.h"

namespace trellis {
namespace {

using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

// Shared by the loop (writer) and the handle (reader); guarded by `mutex` except `cancel`.
struct RequestChannel {
  uint64_t id = 0;
  std::vector<TokenId> prompt;  // set before the handle exists, then read-only
  std::string cache_namespace;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::string> pieces;  // text not yet taken by next_text (pull mode only)
  bool finished = false;
  RequestOutput output;  // complete once finished
  std::atomic<bool> cancel{false};
};

bool RequestHandle::next_text(std::string& text) {
  std::unique_lock<std::mutex> lock(channel_->mutex);
  channel_->changed.wait(lock, [&] { return !channel_->pieces.empty() || channel_->finished; });
  if (channel_->pieces.empty()) {
    text.clear();
    return false;
  }
  text = std::move(channel_->pieces.front());
  channel_->pieces.pop_front();
  return true;
}

const RequestOutput& RequestHandle::wait() {
  std::unique_lock<std::mutex> lock(channel_->mutex);
  channel_->changed.wait(lock, [&] { return channel_->finished; });
  return channel_->output;
}

void RequestHandle::cancel() {
  channel_->cancel = true;
}

bool RequestHandle::finished() const {
  std::lock_guard<std::mutex> lock(channel_->mutex);
  return channel_->finished;
}

uint64_t RequestHandle::id() const {
  return channel_->id;
}

// One request as the loop sees it: a scheduled sequence plus its sampling and output state.
struct Engine::Request : Sequence {
  std::shared_ptr<RequestChannel> channel;
  EngineRequest params;
  StopCondition condition;
  std::optional<Sampler> sampler;
  std::optional<StopMatcher> stop;
  std::function<void(std::string_view)> on_text;
  // Branches of a fork waiting for this request's prompt logits (then they share its blocks).
  std::vector<std::shared_ptr<Request>> branches;
  RequestOutput output;  // filled as it runs, handed to the channel at the end
  Clock::time_point submitted;
  bool started = false;  // admitted at least once (queue time recorded)
};

Result<std::unique_ptr<Engine>> Engine::create(const std::string& model_path,
                                               const EngineConfig& config) {
  auto engine = std::unique_ptr<Engine>(new Engine());
  TRELLIS_TRY(engine->init(model_path, config));
  engine->thread_ = std::thread([e = engine.get()] { e->loop(); });
  return engine;
}

Status Engine::init(const std::string& model_path, const EngineConfig& config) {
  const SchedulerConfig& sc = config.scheduler;
  if (config.block_size <= 0 || sc.max_seqs < 1 || sc.max_batch_tokens < sc.max_seqs ||
      sc.max_wait_steps < 0) {
    return Error{"block size must be positive, max_seqs >= 1, batch tokens >= max_seqs"};
  }
  Result<LoadedModel> loaded = load_model(model_path);
  if (!loaded.ok()) return loaded.error();
  file_ = std::move(loaded->file);
  model_ = std::move(loaded->model);
  tokenizer_ = std::move(loaded->tokenizer);
  const LlamaHParams& hp = model_->hparams();
  n_vocab_ = static_cast<int32_t>(hp.n_vocab);
  Result<KvRuntime> runtime =
      create_kv_runtime(*model_, config.block_size, config.kv_type, config.n_ctx, config.kv_bytes,
                        config.kv_tokens, config.prefix_cache);
  if (!runtime.ok()) return runtime.error();
  n_ctx_ = runtime->n_ctx;
  kv_ = std::move(runtime->kv);
  blocks_ = std::move(runtime->blocks);
  cache_ = std::move(runtime->cache);
  scheduler_ = std::make_unique<Scheduler>(*cache_, sc);
  workspace_ = std::make_unique<LlamaWorkspace>(hp, sc.max_batch_tokens);
  threads_ = std::make_unique<ThreadPool>(
      config.n_threads > 0 ? config.n_threads : ThreadPool::default_thread_count());
  if (!(config.max_pinned_fraction >= 0 && config.max_pinned_fraction <= 1))
    return Error{"max_pinned_fraction must be in [0, 1]"};
  // Pins may never keep one full-context request from fitting (see size_kv_pool).
  const int32_t one_request = (n_ctx_ + config.block_size - 1) / config.block_size + 1;
  max_pinned_blocks_ =
      std::max(0, std::min(static_cast<int32_t>(config.max_pinned_fraction * blocks_->n_total()),
                           blocks_->n_total() - one_request));
  stats_.n_blocks_total = blocks_->n_total();
  stats_.n_blocks_free = blocks_->n_free();
  return {};
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status Engine::check_request(const EngineRequest& request) const {
  if (request.prompt.empty()) return Error{"the prompt is empty (no tokens)"};
  if (static_cast<int32_t>(request.prompt.size()) > n_ctx_) {
    return Error{"the prompt has " + std::to_string(request.prompt.size()) +
                 " tokens, more than the context of " + std::to_string(n_ctx_)};
  }
  for (TokenId id : request.prompt) {
    if (id < 0 || id >= n_vocab_)
      return Error{"token id " + std::to_string(id) + " is outside the vocab"};
  }
  if (request.max_tokens < 0) return Error{"max_tokens must not be negative"};
  return request.sampling.validate();
}

Result<std::shared_ptr<Engine::Request>> Engine::make_request(
    EngineRequest params, std::function<void(std::string_view)> on_text) {
  TRELLIS_TRY(check_request(params));
  auto r = std::make_shared<Request>();
  const TokenId eos = tokenizer_->vocab().eos_id;
  if (!params.ignore_eos && eos != kNoToken) r->condition.stop_token_ids.push_back(eos);
  // max_tokens 0 (a warm-up) never samples, so the stop condition need not know it.
  if (params.max_tokens > 0) r->condition.max_tokens = params.max_tokens;
  r->condition.stop_strings = params.stop;
  TRELLIS_TRY(r->condition.validate());
  Result<Sampler> sampler = Sampler::create(params.sampling, n_vocab_);
  if (!sampler.ok()) return sampler.error();
  r->sampler.emplace(std::move(sampler).value());
  r->stop.emplace(r->condition, *tokenizer_);
  r->channel = std::make_shared<RequestChannel>();
  r->channel->prompt = params.prompt;
  r->channel->cache_namespace = params.cache_namespace;
  r->cache_namespace = params.cache_namespace;
  r->tokens = params.prompt;
  r->n_prompt = static_cast<int32_t>(params.prompt.size());
  r->params = std::move(params);
  r->on_text = std::move(on_text);
  r->submitted = Clock::now();
  r->output.stats.n_prompt_tokens = r->n_prompt;
  std::lock_guard<std::mutex> lock(mutex_);
  r->id = next_id_++;
  r->channel->id = r->id;
  return r;
}

Result<RequestHandle> Engine::submit(EngineRequest request,
                                     std::function<void(std::string_view)> on_text) {
  Result<std::shared_ptr<Request>> r = make_request(std::move(request), std::move(on_text));
  if (!r.ok()) return r.error();
  RequestHandle handle((*r)->channel);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    submitted_.push_back(std::move(r).value());
  }
  wake_.notify_all();
  return handle;
}

Result<std::vector<RequestHandle>> Engine::fork(
    EngineRequest request, int32_t n,
    std::function<void(int32_t branch, std::string_view text)> on_text) {
  if (n < 1) return Error{"fork needs at least one branch"};
  std::vector<std::shared_ptr<Request>> branches;
  const uint64_t seed = request.sampling.seed;
  for (int32_t i = 0; i < n; ++i) {
    EngineRequest branch = request;
    branch.sampling.seed = derive_seed(seed, static_cast<uint64_t>(i));
    std::function<void(std::string_view)> branch_text;
    if (on_text) branch_text = [on_text, i](std::string_view text) { on_text(i, text); };
    Result<std::shared_ptr<Request>> r = make_request(std::move(branch), std::move(branch_text));
    if (!r.ok()) return r.error();
    branches.push_back(std::move(r).value());
  }
  std::vector<RequestHandle> handles;
  for (const auto& b : branches) handles.emplace_back(b->channel);
  // The first branch runs the prompt; the others join it when its prompt logits arrive.
  std::shared_ptr<Request> leader = branches.front();
  leader->branches.assign(branches.begin() + 1, branches.end());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    submitted_.push_back(leader);
  }
  wake_.notify_all();
  return handles;
}

Result<std::vector<RequestHandle>> Engine::fork(const RequestHandle& parent, int32_t n,
                                                EngineRequest params) {
  if (!parent.finished())
    return Error{"fork needs a finished request (a running one has no fixed history yet)"};
  const RequestOutput& out = const_cast<RequestHandle&>(parent).wait();
  if (out.finish_reason == "error") return Error{"cannot fork a request that failed"};
  const RequestChannel& channel = *parent.channel_;
  params.prompt = channel.prompt;
  params.prompt.insert(params.prompt.end(), out.tokens.begin(), out.tokens.end());
  params.cache_namespace = channel.cache_namespace;
  return fork(std::move(params), n);
}

std::vector<Result<RequestOutput>> Engine::generate_batch(std::vector<EngineRequest> requests) {
  // Sorting the prompts (by namespace, then lexicographically by tokens) visits their radix tree
  // depth-first: every shared prefix's requests come back to back.
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const EngineRequest& x = requests[a];
    const EngineRequest& y = requests[b];
    if (x.cache_namespace != y.cache_namespace) return x.cache_namespace < y.cache_namespace;
    return x.prompt < y.prompt;
  });
  std::vector<Result<RequestHandle>> handles(requests.size(), Error{"not submitted"});
  for (size_t i : order) handles[i] = submit(std::move(requests[i]));
  std::vector<Result<RequestOutput>> outputs;
  for (Result<RequestHandle>& h : handles) {
    if (h.ok()) {
      outputs.emplace_back(h->wait());
    } else {
      outputs.emplace_back(h.error());
    }
  }
  return outputs;
}

Status Engine::warm(const std::string& ns, std::vector<TokenId> prefix) {
  EngineRequest request;
  request.prompt = std::move(prefix);
  request.max_tokens = 0;
  request.cache_namespace = ns;
  Result<RequestHandle> handle = submit(std::move(request));
  if (!handle.ok()) return handle.error();
  const RequestOutput& out = handle->wait();
  if (out.finish_reason == "error") return Error{out.error};
  return {};
}

Result<uint64_t> Engine::pin(const std::string& ns, std::vector<TokenId> prefix,
                             std::chrono::milliseconds ttl) {
  if (!cache_->config().enabled) return Error{"cannot pin a prefix: the prefix cache is off"};
  if (ttl.count() < 0) return Error{"a pin's time-to-live must not be negative"};
  TRELLIS_TRY(warm(ns, prefix));
  Result<uint64_t> result = Error{"the engine stopped"};
  run_on_loop([&] {
    PrefixCache::Pin pinned = cache_->pin(ns, prefix);
    if (pinned.n_blocks == 0) {
      result = Error{"cannot pin: no part of the prefix is cached"};
      return;
    }
    if (n_pinned_blocks_ + pinned.n_blocks > max_pinned_blocks_) {
      result = Error{"cannot pin " + std::to_string(pinned.n_blocks) +
                     " more blocks: pinned "
                     "prefixes may hold " +
                     std::to_string(max_pinned_blocks_) + " blocks and " +
                     std::to_string(n_pinned_blocks_) + " are taken"};
      return;  // `pinned` unlocks here
    }
    n_pinned_blocks_ += pinned.n_blocks;
    const Clock::time_point expiry =
        ttl.count() > 0 ? Clock::now() + ttl : Clock::time_point::max();
    pins_.push_back(PinEntry{next_pin_id_, std::move(pinned), expiry});
    result = next_pin_id_++;
  });
  return result;
}

Status Engine::unpin(uint64_t pin_id) {
  Status status = Error{"no pin " + std::to_string(pin_id) + " (unknown, unpinned or expired)"};
  run_on_loop([&] {
    auto it =
        std::find_if(pins_.begin(), pins_.end(), [&](const PinEntry& e) { return e.id == pin_id; });
    if (it == pins_.end()) return;
    n_pinned_blocks_ -= it->pin.n_blocks;
    pins_.erase(it);
    status = {};
  });
  return status;
}

Engine::Clock::time_point Engine::expire_pins() {
  const Clock::time_point now = Clock::now();
  Clock::time_point next = Clock::time_point::max();
  for (auto it = pins_.begin(); it != pins_.end();) {
    if (it->expiry <= now) {
      n_pinned_blocks_ -= it->pin.n_blocks;
      it = pins_.erase(it);
    } else {
      next = std::min(next, it->expiry);
      ++it;
    }
  }
  return next;
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void Engine::run_on_loop(std::function<void()> fn) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back([this, fn = std::move(fn), done] {
      fn();
      refresh_stats(0, 0);
      done->set_value();
    });
  }
  wake_.notify_all();
  finished.wait();
}

void Engine::flush_cache() {
  run_on_loop([this] { cache_->flush(); });
}

Status Engine::check_invariants() {
  Status status;
  run_on_loop([&] { status = cache_->check_invariants(); });
  return status;
}

void Engine::loop() {
  for (;;) {
    std::deque<std::shared_ptr<Request>> arrivals;
    std::deque<std::function<void()>> tasks;
    const Clock::time_point next_expiry = expire_pins();
    {
      std::unique_lock<std::mutex> lock(mutex_);
      auto has_work = [&] {
        return stopping_ || !submitted_.empty() || !tasks_.empty() || !active_.empty();
      };
      if (next_expiry == Clock::time_point::max()) {
        wake_.wait(lock, has_work);
      } else {
        wake_.wait_until(lock, next_expiry, has_work);
      }
      if (stopping_) break;
      arrivals.swap(submitted_);
      tasks.swap(tasks_);
    }
    for (std::function<void()>& task : tasks) task();
    for (std::shared_ptr<Request>& r : arrivals) {
      scheduler_->enqueue(r.get());
      for (const auto& b : r->branches) active_.push_back(b);
      active_.push_back(std::move(r));
    }
    cancel_requested();
    if (!active_.empty() && !step()) {
      // Nothing could run although requests are active (should not happen: a lone request
      // always fits); do not spin.
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_for(lock, std::chrono::milliseconds(1));
    }
    // Going idle: the figures must show what the last cancellation released (step() refreshes
    // them only when it runs).
    if (active_.empty()) refresh_stats(0, 0);
  }
  // Shutting down: whatever still runs ends as cancelled, releasing its blocks.
  for (const auto& r : std::vector<std::shared_ptr<Request>>(active_)) finish(*r, "cancelled");
  std::deque<std::shared_ptr<Request>> never_started;
  std::deque<std::function<void()>> tasks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    never_started.swap(submitted_);
    tasks.swap(tasks_);
  }
  for (const auto& r : never_started) {
    std::lock_guard<std::mutex> channel_lock(r->channel->mutex);
    r->channel->output.finish_reason = "cancelled";
    r->channel->finished = true;
    r->channel->changed.notify_all();
  }
  for (std::function<void()>& task : tasks) task();
}

void Engine::cancel_requested() {
  for (const auto& r : std::vector<std::shared_ptr<Request>>(active_)) {
    if (r->channel->cancel.load() && r->state != SequenceState::FINISHED) {
      finish(*r, "cancelled");
    }
  }
}

bool Engine::step() {
  const Clock::time_point plan_start = Clock::now();
  const StepPlan plan = scheduler_->plan();
  const double plan_ms = ms_between(plan_start, Clock::now());
  for (Sequence* seq : plan.admitted) {
    auto* r = static_cast<Request*>(seq);
    if (!r->started) {
      r->started = true;
      r->output.stats.queue_ms = ms_between(r->submitted, Clock::now());
    }
  }
  if (!plan.empty()) {
    batch_.clear();
    for (const ScheduledChunk& c : plan.chunks) {
      batch_.add_sequence(c.seq->tokens.data() + c.begin, c.n_tokens, c.begin,
                          c.seq->kv.block_table(), c.wants_logits());
    }
    logits_.resize(std::max(logits_.size(), batch_.output_rows.size() * size_t(n_vocab_)));
    model_->forward(batch_, *kv_, *workspace_, *threads_, logits_.data());
    scheduler_->complete(plan);
    size_t out = 0;
    for (const ScheduledChunk& c : plan.chunks) {
      if (!c.wants_logits()) continue;
      on_logits(*static_cast<Request*>(c.seq), logits_.data() + out * size_t(n_vocab_));
      ++out;
    }
  }
  refresh_stats(static_cast<int64_t>(plan.preempted.size()), plan_ms);
  return !plan.empty();
}

void Engine::refresh_stats(int64_t n_new_preemptions, double plan_ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.n_blocks_free = blocks_->n_free();
  stats_.n_blocks_in_use = blocks_->n_in_use();
  stats_.n_blocks_cached = blocks_->n_cached();
  stats_.n_blocks_allocated = blocks_->n_allocated();
  stats_.n_blocks_acquired = blocks_->n_acquired();
  stats_.n_blocks_evicted = blocks_->n_evicted();
  stats_.n_running = static_cast<int32_t>(scheduler_->running().size());
  stats_.n_waiting = static_cast<int32_t>(scheduler_->waiting().size());
  stats_.n_blocks_pinned = n_pinned_blocks_;
  stats_.n_cache_leaves = cache_->tree().n_leaves();
  stats_.n_steps = scheduler_->n_steps();
  stats_.n_preemptions += n_new_preemptions;
  stats_.scheduler_ms += plan_ms;
}

void Engine::on_logits(Request& request, const float* logits) {
  if (request.params.max_tokens == 0) {  // a warm-up: the prompt is cached, nothing to sample
    finish(request, "length");
    return;
  }
  if (!request.branches.empty()) fork_branches(request, logits);
  sample_and_emit(request, logits);
}

void Engine::fork_branches(Request& parent, const float* logits) {
  std::vector<std::shared_ptr<Request>> branches;
  branches.swap(parent.branches);
  for (const std::shared_ptr<Request>& b : branches) {
    if (b->state == SequenceState::FINISHED) continue;  // cancelled meanwhile
    Result<SequenceKv> kv = cache_->fork(parent.kv, parent.n_computed);
    b->started = true;
    b->output.stats.queue_ms = ms_between(b->submitted, Clock::now());
    if (!kv.ok()) {  // no block for the copy: run it as an ordinary request (it will share
      scheduler_->enqueue(b.get());  // the cached prompt)
      continue;
    }
    b->kv = std::move(kv).value();
    b->n_computed = parent.n_computed;
    b->n_cached_tokens = parent.n_computed;
    scheduler_->add_running(b.get());
    sample_and_emit(*b, logits);
  }
}

void Engine::sample_and_emit(Request& r, const float* logits) {
  const std::span<const float> row(logits, static_cast<size_t>(n_vocab_));
  const TokenId next = r.sampler->sample(row, r.tokens);
  if (r.params.return_logits) r.output.logits.emplace_back(row.begin(), row.end());
  if (r.output.stats.ttft_ms == 0) r.output.stats.ttft_ms = ms_between(r.submitted, Clock::now());
  StopMatcher::Step step = r.stop->push(next);
  if (!r.condition.is_stop_token(next)) {
    r.tokens.push_back(next);
    r.output.tokens.push_back(next);
  }
  // The next step computes position size() - 1, which must lie inside the context.
  if (!step.finished() && r.size() > n_ctx_) {
    StopMatcher::Step last = r.stop->finish(FinishReason::LENGTH);
    step.text += last.text;
    step.finish_reason = last.finish_reason;
  }
  if (!step.text.empty()) {
    r.output.text += step.text;
    if (r.on_text) {
      r.on_text(step.text);
    } else {
      std::lock_guard<std::mutex> lock(r.channel->mutex);
      r.channel->pieces.push_back(step.text);
      r.channel->changed.notify_all();
    }
  }
  if (step.finished()) finish(r, std::string(finish_reason_name(step.finish_reason)));
}

void Engine::finish(Request& r, const std::string& reason) {
  if (r.state != SequenceState::FINISHED) scheduler_->remove(&r);
  for (const std::shared_ptr<Request>& b : r.branches) {  // a fork leader ended before forking
    if (b->state != SequenceState::FINISHED) finish(*b, reason == "cancelled" ? reason : "error");
  }
  r.branches.clear();
  RequestStats& stats = r.output.stats;
  stats.n_cached_tokens = r.n_cached_tokens;
  stats.n_generated_tokens = static_cast<int32_t>(r.output.tokens.size());
  stats.n_blocks_allocated = r.n_blocks_allocated;
  stats.n_blocks_acquired = r.n_blocks_acquired;
  stats.n_preemptions = r.n_preemptions;
  stats.total_ms = ms_between(r.submitted, Clock::now());
  r.output.finish_reason = reason;
  if (reason == "error" && r.output.error.empty())
    r.output.error = "the request it forked from failed";
  {
    std::lock_guard<std::mutex> lock(r.channel->mutex);
    r.channel->output = std::move(r.output);
    r.channel->finished = true;
    r.channel->changed.notify_all();
  }
  auto it = std::find_if(active_.begin(), active_.end(),
                         [&](const std::shared_ptr<Request>& a) { return a.get() == &r; });
  if (it != active_.end()) active_.erase(it);
}

}  // namespace trellis
