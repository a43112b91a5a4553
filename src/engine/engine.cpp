#include "engine/engine.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstdio>
#include <future>
#include <limits>
#include <optional>
#include <utility>

#include "engine/constrained_decoding.h"
#include "engine/disk_prefix.h"
#include "engine/local_executor.h"
#include "engine/model_runtime.h"
#include "engine/pipeline_executor.h"
#include "engine/stop_matcher.h"
#include "sample/rng.h"
#include "sample/sampler.h"

namespace trellis {
namespace {

using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

EngineRequest greedy_request(std::vector<TokenId> prompt, int32_t max_tokens) {
  EngineRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  return r;
}

double RequestStats::prefill_tokens_per_s() const {
  const double ms = prefill_ms();
  return ms > 0 ? (n_prompt_tokens - n_cached_tokens) * 1000.0 / ms : 0.0;
}

double RequestStats::decode_tokens_per_s() const {
  const double ms = decode_ms();
  return ms > 0 ? std::max(0, n_generated_tokens - 1) * 1000.0 / ms : 0.0;
}

// Shared by the loop (writer) and the handle (reader); guarded by `mutex` except `cancel`.
struct RequestChannel {
  uint64_t id = 0;
  std::vector<TokenId> prompt;  // set before the handle exists, then read-only
  std::string cache_namespace;
  std::mutex mutex;
  std::condition_variable changed;
  // Text not yet taken by next_text (pull mode only). The loop appends to it (it is sized for the
  // request's whole text at submission) and next_text copies it out and clears it, keeping its
  // capacity: the copy's allocation, if any, is the reader's.
  std::string pending_text;
  std::vector<Logprobs> logprobs;  // as they are computed (when the request asks for them)
  bool finished = false;
  RequestOutput output;  // complete once finished
  std::atomic<bool> cancel{false};
};

bool RequestHandle::next_text(std::string& text) {
  std::unique_lock<std::mutex> lock(channel_->mutex);
  channel_->changed.wait(lock,
                         [&] { return !channel_->pending_text.empty() || channel_->finished; });
  text.assign(channel_->pending_text);
  channel_->pending_text.clear();
  return !text.empty();
}

std::vector<Logprobs> RequestHandle::logprobs_from(size_t first) const {
  return logprobs_range(first, std::numeric_limits<size_t>::max());
}

std::vector<Logprobs> RequestHandle::logprobs_range(size_t first, size_t count) const {
  std::lock_guard<std::mutex> lock(channel_->mutex);
  const std::vector<Logprobs>& all = channel_->logprobs;
  if (first >= all.size()) return {};
  const size_t last = first + std::min(count, all.size() - first);
  return std::vector<Logprobs>(all.begin() + static_cast<std::ptrdiff_t>(first),
                               all.begin() + static_cast<std::ptrdiff_t>(last));
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
  std::optional<GrammarCursor> grammar;  // a constrained request's place in its grammar
  std::vector<float> masked_logits;      // [n_vocab] the row it samples from (constrained)
  RequestEvents events;
  std::string step_text;         // the text of the token being emitted; reused, sized at submission
  int32_t n_tokens_unshown = 0;  // generated tokens whose text no on_text event has carried yet
  // Branches of a fork waiting for this request's prompt logits (then they share its blocks).
  std::vector<std::shared_ptr<Request>> branches;
  RequestOutput output;  // filled as it runs, handed to the channel at the end
  Clock::time_point submitted;
  bool started = false;        // admitted at least once (queue time recorded)
  int32_t n_disk_reloads = 0;  // loads after arrival: its prefix was evicted while it waited
  DiskLoad disk_load;          // blocks the loader reads, until finished (WAITING_FOR_KV)
  int32_t n_disk_tokens = 0;   // prompt tokens the cache took from disk for this request
  SpeculationState spec;       // its drafts' acceptance, by source
  // A decode chunk with a draft: the last token, then the draft (the forward pass's input).
  std::vector<TokenId> draft_input;
};

Result<std::unique_ptr<Engine>> Engine::create(const std::string& model_path,
                                               const EngineConfig& config) {
  auto engine = std::unique_ptr<Engine>(new Engine());
  TRELLIS_TRY(engine->init_from_file(model_path, config));
  engine->thread_ = std::thread([e = engine.get()] { e->loop(); });
  return engine;
}

Result<std::unique_ptr<Engine>> Engine::create(EngineBackend backend, const EngineConfig& config) {
  auto engine = std::unique_ptr<Engine>(new Engine());
  TRELLIS_TRY(engine->init_from_backend(std::move(backend), config));
  engine->thread_ = std::thread([e = engine.get()] { e->loop(); });
  return engine;
}

namespace {

Status check_config(const EngineConfig& config) {
  const SchedulerConfig& sc = config.scheduler;
  if (config.block_size <= 0 || sc.max_seqs < 1 || sc.max_batch_tokens < sc.max_seqs ||
      sc.max_wait_steps < 0) {
    return Error{"block size must be positive, max_seqs >= 1, batch tokens >= max_seqs"};
  }
  return {};
}

}  // namespace

Status Engine::init_from_file(const std::string& model_path, const EngineConfig& config) {
  TRELLIS_TRY(check_config(config));
  Pipeline* const pipeline = config.pipeline;
  ChooseLayers choose;
  if (pipeline != nullptr)
    choose = [pipeline](const GgufFile& f) { return pipeline->local_layers(f); };
  Result<LoadedModel> loaded = load_model(model_path, choose);
  if (!loaded.ok()) return loaded.error();
  file_ = std::move(loaded->file);
  model_ = std::move(loaded->model);
  model_->set_observer(config.activation_observer);
  tokenizer_ = std::move(loaded->tokenizer);
  // Window pages are not sent down a pipeline nor kept by the disk tier: both need whole blocks.
  const KvWindowing windowing{!config.swa_full && pipeline == nullptr && config.cache_dir.empty(),
                              config.scheduler.max_batch_tokens, config.scheduler.max_seqs};
  Result<KvRuntime> runtime =
      create_kv_runtime(*model_, config.block_size, config.kv_types, config.n_ctx, config.kv_bytes,
                        config.kv_tokens, config.prefix_cache, windowing);
  if (!runtime.ok()) return runtime.error();
  adopt_kv(std::move(runtime).value());
  // No sequence grows beyond the context: RoPE is fixed for it (LongRoPE's factor choice).
  model_->set_context_length(n_ctx_);
  if (!config.cache_dir.empty()) TRELLIS_TRY(open_disk_tier(model_path, config));
  const int32_t max_rows = config.scheduler.max_batch_tokens;
  const bool wants_draft_model =
      !config.draft_model.empty() && config.speculation.uses(DraftSource::DRAFT_MODEL);
  if (wants_draft_model && pipeline != nullptr)
    return Error{"a draft model needs the whole model in this process, not a pipeline"};
  if (pipeline != nullptr) {
    Result<std::unique_ptr<PipelineExecutor>> executor =
        PipelineExecutor::create(*pipeline, *model_, *kv_, max_rows, n_ctx_, config.n_threads);
    if (!executor.ok()) return executor.error();
    executor_ = std::move(executor).value();
  } else {
    auto local = std::make_unique<LocalExecutor>(*model_, *kv_, max_rows, n_ctx_, config.n_threads);
    if (wants_draft_model) TRELLIS_TRY(load_draft_model(config, local->threads()));
    executor_ = std::move(local);
  }
  return init_loop(config);
}

Status Engine::init_from_backend(EngineBackend backend, const EngineConfig& config) {
  TRELLIS_TRY(check_config(config));
  if (config.pipeline != nullptr || !config.cache_dir.empty())
    return Error{"an engine without a model file has no pipeline and no disk tier"};
  if (backend.tokenizer == nullptr || !backend.make_executor)
    return Error{"an engine backend needs a tokenizer and an executor"};
  tokenizer_ = std::move(backend.tokenizer);
  KvLayout layout = backend.kv_layout;
  layout.block_size = config.block_size;
  layout.types = config.kv_types;
  Result<KvRuntime> runtime =
      create_kv_runtime(layout, layout.n_layer, backend.n_ctx, config.kv_bytes, config.kv_tokens,
                        config.prefix_cache);
  if (!runtime.ok()) return runtime.error();
  adopt_kv(std::move(runtime).value());
  Result<std::unique_ptr<StepExecutor>> executor = backend.make_executor(*kv_);
  if (!executor.ok()) return executor.error();
  executor_ = std::move(executor).value();
  return init_loop(config);
}

Status Engine::load_draft_model(const EngineConfig& config, ThreadPool& threads) {
  Result<LoadedModel> loaded = load_model(config.draft_model);
  if (!loaded.ok()) return Error{"draft model: " + loaded.error().message};
  TRELLIS_TRY(check_same_vocab(*loaded->tokenizer, *tokenizer_));
  DraftModelShape shape;
  shape.block_size = config.block_size;
  shape.kv_types = config.kv_types;
  shape.n_ctx = n_ctx_;
  shape.max_rows = config.scheduler.max_batch_tokens;
  shape.max_seqs = config.scheduler.max_seqs;
  Result<std::unique_ptr<DraftModel>> draft =
      DraftModel::create(std::move(loaded->model), *blocks_, threads, shape);
  if (!draft.ok()) return Error{"draft model: " + draft.error().message};
  draft_file_ = std::move(loaded->file);
  draft_model_ = std::move(draft).value();
  draft_jobs_.reserve(static_cast<size_t>(config.scheduler.max_seqs));
  return {};
}

void Engine::adopt_kv(KvRuntime runtime) {
  n_ctx_ = runtime.n_ctx;
  kv_ = std::move(runtime.kv);
  blocks_ = std::move(runtime.blocks);
  pages_ = std::move(runtime.pages);
  cache_ = std::move(runtime.cache);
}

Status Engine::init_loop(const EngineConfig& config) {
  const SchedulerConfig& sc = config.scheduler;
  on_failure_ = config.on_failure;
  n_vocab_ = static_cast<int32_t>(tokenizer_->vocab().size());
  // An executor of depth n keeps n steps in flight (a pipeline: one per stage), each with its own
  // group of the running sequences; with depth 1 a step comes back before the next is planned.
  const int32_t depth = executor_->depth();
  SchedulerConfig scheduling = sc;
  scheduling.decode_groups = depth;
  scheduler_ = std::make_unique<Scheduler>(*cache_, scheduling);
  in_flight_.resize(static_cast<size_t>(depth));
  for (InFlightStep& step : in_flight_) step.plan.chunks.reserve(static_cast<size_t>(sc.max_seqs));
  // The step loop's own buffers, sized for the largest step (see submit() for the requests').
  batch_.reserve(sc.max_batch_tokens, sc.max_seqs);
  // One row per sequence; with speculation, decode tokens and drafts share max_step_rows (within
  // the step's budget).
  size_t max_rows = static_cast<size_t>(sc.max_seqs);
  if (config.speculation.enabled()) {
    const auto step_rows =
        static_cast<size_t>(std::max(0, config.speculation.length.max_step_rows));
    max_rows = std::max(max_rows, std::min(step_rows, static_cast<size_t>(sc.max_batch_tokens)));
  }
  logits_.reserve(max_rows, static_cast<size_t>(n_vocab_));
  active_.reserve(static_cast<size_t>(sc.max_seqs));
  stats_.n_blocks_total = blocks_->n_total();
  stats_.block_bytes = kv_->layout().bytes_per_block();
  stats_.page_bytes = pages_ != nullptr ? kv_->layout().bytes_per_page() : 0;
  stats_.n_window_pages_total = pages_ != nullptr ? pages_->n_total() : 0;
  stats_.n_blocks_free = blocks_->n_free();
  grammars_ = std::make_unique<GrammarRegistry>(*tokenizer_);
  jump_forward_ = config.jump_forward;
  // Verifying a draft needs the step back before the sequence's next one is planned, which a
  // pipeline of several stages does not wait for.
  SpeculationConfig speculation = config.speculation;
  if (draft_model_ == nullptr) speculation.sources[size_t(DraftSource::DRAFT_MODEL)] = false;
  if (speculation.enabled() && depth == 1) speculator_ = std::make_unique<Speculator>(speculation);
  return {};
}

const Model& Engine::model() const {
  assert(model_ != nullptr && "the engine was not created from a model file");
  return *model_;
}

const GgufFile& Engine::file() const {
  assert(file_ != nullptr && "the engine was not created from a model file");
  return *file_;
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (disk_ != nullptr) disk_->cancel_reads();
  if (thread_.joinable()) thread_.join();
  // The loader runs its last jobs (without reading), which hand their requests (ended by the loop
  // as it stopped) back after the loop is gone; their held blocks go back before the tier closes,
  // which then writes what the loop spilled.
  if (disk_ != nullptr) {
    disk_->wait_loads();
    for (const auto& r : kv_arrived_) disk_->release(*cache_, r->disk_load);
    kv_arrived_.clear();
  }
  cancel_unstarted();
  disk_.reset();
  executor_.reset();  // a pipeline's other stages let go of the engine's KV
}

Status Engine::open_disk_tier(const std::string& model_path, const EngineConfig& config) {
  if (config.pipeline != nullptr)
    return Error{"--cache-dir cannot be used with --pipeline: the KV blocks are split over ranks"};
  if (!config.prefix_cache.enabled)
    return Error{"--cache-dir needs the prefix cache (--prefix-cache on)"};
  DiskPrefixConfig dc;
  dc.dir = config.cache_dir;
  dc.budget_bytes = config.cache_disk_bytes;
  dc.model_path = model_path;
  dc.architecture = model_->hparams().arch;
  dc.log = config.disk_log;
  // Loads may hold what the pool has beyond the longest sequence, which must always fit.
  const int32_t B = kv_->layout().block_size;
  dc.max_held_blocks = blocks_->n_total() - 1 - (n_ctx_ + B - 1) / B;
  Result<std::unique_ptr<DiskPrefixTier>> disk = DiskPrefixTier::open(dc, kv_->layout());
  if (!disk.ok()) return disk.error();
  disk_ = std::move(disk).value();
  cache_->set_spill_observer([this](const EvictedNode& node) { disk_->spill(node, *kv_); });
  return {};
}

bool Engine::start_disk_load(const std::shared_ptr<Request>& r) {
  if (disk_ == nullptr) return false;
  const bool started = disk_->start_load(*cache_, *kv_, *r, r->disk_load, [this, r] {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      kv_arrived_.push_back(r);
    }
    wake_.notify_all();
  });
  if (started) scheduler_->wait_for_kv(r.get());
  return started;
}

// A request waiting in the queue may find less of its prompt in the pool than the disk tier
// holds: the requests admitted before it evicted its prefix (to the tier), or there was no room
// for it on arrival. When it is next to be admitted (a slot is free, it heads the queue in policy
// order), it waits for its prefix to be read back, and keeps its turn meanwhile (see
// sched/sequence.h). Bounded per request, so that a pool too small to keep what was read cannot
// make it go round forever.
void Engine::reload_evicted_prefixes() {
  if (disk_ == nullptr) return;
  constexpr int32_t kMaxReloads = 3;
  Sequence* const head = scheduler_->next_admission();
  if (head == nullptr) return;
  const auto it =
      std::find_if(active_.begin(), active_.end(), [&](const auto& r) { return r.get() == head; });
  if (it == active_.end()) return;
  const std::shared_ptr<Request>& r = *it;
  if (r->admitted_once || !r->branches.empty() || r->n_disk_reloads >= kMaxReloads) return;
  if (start_disk_load(r)) ++r->n_disk_reloads;
}

void Engine::finish_disk_load(Request& r) {
  if (r.state == SequenceState::FINISHED) {  // cancelled or failed while it read
    disk_->release(*cache_, r.disk_load);
    return;
  }
  r.output.stats.disk_load_ms = r.disk_load.ms;
  r.n_disk_tokens = disk_->finish_load(*cache_, *kv_, r, r.disk_load);
  scheduler_->kv_ready(&r);
}

void Engine::cancel_unstarted() {
  std::vector<std::shared_ptr<Request>> never_started;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    never_started.swap(submitted_);
  }
  for (const auto& r : never_started) end_unstarted(*r, FinishReason::CANCELLED, "");
}

void Engine::end_unstarted(Request& r, FinishReason reason, const std::string& error) {
  for (const auto& b : r.branches) end_unstarted(*b, reason, error);  // a fork's other handles
  r.branches.clear();
  {
    std::lock_guard<std::mutex> channel_lock(r.channel->mutex);
    r.channel->output.finish_reason = reason;
    r.channel->output.error = error;
    r.channel->finished = true;
    r.channel->changed.notify_all();
  }
  if (r.events.on_end) r.events.on_end(r.channel->output);  // read-only once finished
}

std::string Engine::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
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
  if (request.logprobs < -1 || request.logprobs > n_vocab_)
    return Error{"logprobs must be -1 (none) or between 0 and the vocab size"};
  for (TokenId id : request.stop_token_ids) {
    if (id < 0 || id >= n_vocab_)
      return Error{"stop token id " + std::to_string(id) + " is outside the vocab"};
  }
  if (request.max_tokens < 0) return Error{"max_tokens must not be negative"};
  return request.sampling.validate();
}

Result<std::shared_ptr<Engine::Request>> Engine::make_request(EngineRequest params,
                                                              RequestEvents events) {
  if (std::string why = failure(); !why.empty()) return Error{"the engine has stopped: " + why};
  TRELLIS_TRY(check_request(params));
  auto r = std::make_shared<Request>();
  const TokenId eos = tokenizer_->vocab().eos_id;
  if (!params.ignore_eos && eos != kNoToken) r->condition.stop_token_ids.push_back(eos);
  if (!params.ignore_eos) {
    r->condition.stop_token_ids.insert(r->condition.stop_token_ids.end(),
                                       params.stop_token_ids.begin(), params.stop_token_ids.end());
  }
  // max_tokens 0 (a warm-up) never samples, so the stop condition need not know it.
  if (params.max_tokens > 0) r->condition.max_tokens = params.max_tokens;
  r->condition.stop_strings = params.stop;
  TRELLIS_TRY(r->condition.validate());
  Result<Sampler> sampler = Sampler::create(params.sampling, n_vocab_);
  if (!sampler.ok()) return sampler.error();
  r->sampler.emplace(std::move(sampler).value());
  r->stop.emplace(r->condition, *tokenizer_, params.spelled_tokens);
  if (params.grammar) {
    r->grammar.emplace(grammars_->cursor(params.grammar));
    r->masked_logits.reserve(static_cast<size_t>(n_vocab_));
  }
  r->channel = std::make_shared<RequestChannel>();
  r->channel->prompt = params.prompt;
  r->channel->cache_namespace = params.cache_namespace;
  r->cache_namespace = params.cache_namespace;
  r->tokens = params.prompt;
  r->n_prompt = static_cast<int32_t>(params.prompt.size());
  r->wants_prompt_logits = params.return_prompt_logits;
  if (speculator_ != nullptr) r->spec = speculator_->new_state();
  r->params = std::move(params);
  r->events = std::move(events);
  r->submitted = Clock::now();
  r->output.stats.n_prompt_tokens = r->n_prompt;
  reserve_output(*r);
  std::lock_guard<std::mutex> lock(mutex_);
  r->id = next_id_++;
  r->channel->id = r->id;
  return r;
}

// Sizes, on the submitting thread, every buffer that the request's steps fill, for the most it can
// generate: its tokens, the block table (through max_size) and its text. The steps then append
// without allocating. The text bound counts every non-ASCII byte as a possible 3-byte U+FFFD, so
// it is loose for some scripts; memory reserved and never written costs address space, not pages.
void Engine::reserve_output(Request& r) const {
  const int32_t max_size = std::min(r.n_prompt + r.params.max_tokens, n_ctx_ + 1);
  const auto max_generated = static_cast<size_t>(std::max(0, max_size - r.n_prompt));
  // A token's text, plus the few bytes held back from the one before (an unfinished character).
  const size_t max_token_bytes = tokenizer_->max_decoded_bytes() + 16;
  r.max_size = max_size;
  r.tokens.reserve(static_cast<size_t>(max_size));
  r.output.tokens.reserve(max_generated);
  r.output.text.reserve(max_generated * max_token_bytes);
  r.step_text.reserve(2 * max_token_bytes);  // one token's text, or the last one's with the tail
  // Pull mode: room for the whole text, so that however far the reader falls behind, the loop
  // appends without allocating.
  if (!r.events.on_text) r.channel->pending_text.reserve(r.output.text.capacity());
  if (r.params.return_logits) r.output.logits.reserve(max_generated);
  if (speculator_ != nullptr && r.params.speculate) {
    const auto max_draft = static_cast<size_t>(speculator_->config().length.max_tokens);
    r.draft.reserve(max_draft);
    r.draft_input.reserve(max_draft + 1);
  }
}

Result<RequestHandle> Engine::submit(EngineRequest request, RequestEvents events) {
  Result<std::shared_ptr<Request>> r = make_request(std::move(request), std::move(events));
  if (!r.ok()) return r.error();
  RequestHandle handle((*r)->channel);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    submitted_.push_back(std::move(r).value());
  }
  wake_.notify_all();
  return handle;
}

Result<RequestHandle> Engine::submit(EngineRequest request,
                                     std::function<void(std::string_view)> on_text) {
  RequestEvents events;
  if (on_text) {
    events.on_text = [on_text = std::move(on_text)](std::string_view text, int32_t) {
      on_text(text);
    };
  }
  return submit(std::move(request), std::move(events));
}

Result<RequestOutput> Engine::run(EngineRequest request,
                                  std::function<void(std::string_view)> on_text) {
  Result<RequestHandle> handle = submit(std::move(request), std::move(on_text));
  if (!handle.ok()) return handle.error();
  const RequestOutput& out = handle->wait();
  if (out.finish_reason == FinishReason::ERROR) return Error{out.error};
  return out;
}

Result<std::vector<RequestHandle>> Engine::fork(EngineRequest request, int32_t n,
                                                ForkEvents events) {
  if (n < 1) return Error{"fork needs at least one branch"};
  if (request.return_prompt_logits && n > 1)
    return Error{"prompt logits are kept for one request, not for the branches of a fork"};
  std::vector<std::shared_ptr<Request>> branches;
  const uint64_t seed = request.sampling.seed;
  for (int32_t i = 0; i < n; ++i) {
    EngineRequest branch = request;
    branch.sampling.seed = derive_seed(seed, static_cast<uint64_t>(i));
    RequestEvents branch_events;
    if (events.on_text) {
      branch_events.on_text = [on_text = events.on_text, i](std::string_view text,
                                                            int32_t n_tokens) {
        on_text(i, text, n_tokens);
      };
    }
    if (events.on_end) {
      branch_events.on_end = [on_end = events.on_end, i](const RequestOutput& output) {
        on_end(i, output);
      };
    }
    Result<std::shared_ptr<Request>> r = make_request(std::move(branch), std::move(branch_events));
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
  if (out.finish_reason == FinishReason::ERROR) return Error{"cannot fork a request that failed"};
  const RequestChannel& channel = *parent.channel_;
  params.prompt = channel.prompt;
  params.prompt.insert(params.prompt.end(), out.tokens.begin(), out.tokens.end());
  params.cache_namespace = channel.cache_namespace;
  return fork(std::move(params), n);
}

Status Engine::warm(const std::string& ns, std::vector<TokenId> prefix) {
  EngineRequest request;
  request.prompt = std::move(prefix);
  request.max_tokens = 0;
  request.cache_namespace = ns;
  Result<RequestHandle> handle = submit(std::move(request));
  if (!handle.ok()) return handle.error();
  const RequestOutput& out = handle->wait();
  if (out.finish_reason == FinishReason::ERROR) return Error{out.error};
  return {};
}

EngineStats Engine::stats() const {
  EngineStats s;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s = stats_;
  }
  // The tier's own figures are live (its writer works between steps); disk_ is set before the
  // loop starts and reset after it ends.
  if (disk_ != nullptr) {
    s.has_disk_tier = true;
    s.disk = disk_->stats();
  }
  return s;
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
  if (disk_ != nullptr) disk_->wait_writes();
}

Status Engine::check_invariants() {
  Status status;
  run_on_loop([&] { status = cache_->check_invariants(); });
  return status;
}

void Engine::loop() {
  // The queues are swapped with these (emptied) vectors under the lock, so both sides keep their
  // capacity and an iteration with nothing new allocates nothing.
  std::vector<std::shared_ptr<Request>> arrivals;
  std::vector<std::shared_ptr<Request>> kv_arrived;
  std::vector<std::function<void()>> tasks;
  bool idle_until_kv = false;  // nothing can run until a disk load comes back
  for (;;) {
    arrivals.clear();
    kv_arrived.clear();
    tasks.clear();
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // Requests that wait only on a load need no step: the loader's return wakes the loop.
      wake_.wait(lock, [&] {
        return stopping_ || !submitted_.empty() || !tasks_.empty() || !kv_arrived_.empty() ||
               (!active_.empty() && !idle_until_kv);
      });
      if (stopping_) break;
      arrivals.swap(submitted_);
      kv_arrived.swap(kv_arrived_);
      tasks.swap(tasks_);
    }
    for (std::function<void()>& task : tasks) task();
    for (const std::shared_ptr<Request>& r : kv_arrived) finish_disk_load(*r);
    for (std::shared_ptr<Request>& r : arrivals) {
      // Accepted by submit() just before a failure: nothing runs on a failed engine.
      if (!failed_.empty()) {
        end_unstarted(*r, FinishReason::ERROR, failed_);
        continue;
      }
      scheduler_->enqueue(r.get());
      start_disk_load(r);  // its prompt continues on disk: it waits for that KV
      for (const auto& b : r->branches) active_.push_back(b);
      active_.push_back(std::move(r));
    }
    cancel_requested();
    reload_evicted_prefixes();
    idle_until_kv = n_in_flight_ == 0 && scheduler_->idle_until_kv();
    if (!active_.empty() && !idle_until_kv) {
      [[maybe_unused]] const bool ran = step();
      // Something always runs while requests are active: a lone request fits the pool once the
      // cache is evicted (see size_kv_pool), and fork branches wait only on a running leader.
      assert(ran && "active requests but nothing could run");
    }
    if (active_.empty()) {
      // Going idle: the figures must show what the last cancellation released (step() refreshes
      // them only when it runs).
      refresh_stats(0, 0);
      check_invariants_when_idle();
    }
  }
  // Shutting down: the steps in flight come back first, then whatever still runs ends as
  // cancelled, releasing its blocks.
  while (n_in_flight_ > 0) collect_oldest();
  for (const auto& r : std::vector<std::shared_ptr<Request>>(active_)) {
    finish(*r, FinishReason::CANCELLED);
  }
  // What is cached goes to the disk tier, so that the next start finds it.
  if (disk_ != nullptr) cache_->flush();
  cancel_unstarted();
  tasks.clear();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks.swap(tasks_);
  }
  for (std::function<void()>& task : tasks) task();
}

void Engine::cancel_requested() {
  // Looked for first, so that the usual step (nobody cancelled) copies nothing.
  const bool any = std::any_of(active_.begin(), active_.end(), [](const auto& r) {
    return r->channel->cancel.load() && r->state != SequenceState::FINISHED;
  });
  if (!any) return;
  // finish() erases from active_ (and may finish fork branches too): walk a copy.
  for (const auto& r : std::vector<std::shared_ptr<Request>>(active_)) {
    // A request in flight ends once its step is back (its blocks are still being written), one
    // waiting for KV once its read is back (the loader writes into its blocks).
    if (r->channel->cancel.load() && r->state != SequenceState::FINISHED && !r->in_flight &&
        r->state != SequenceState::WAITING_FOR_KV) {
      finish(*r, FinishReason::CANCELLED);
    }
  }
}

void Engine::check_invariants_when_idle() {
#ifndef NDEBUG
  const Status status = cache_->check_invariants();
  if (!status.ok()) std::fprintf(stderr, "engine: %s\n", status.error().message.c_str());
  assert(status.ok() && "the KV pool or the prefix tree is inconsistent");
#endif
}

void Engine::propose_drafts() {
  if (speculator_ == nullptr) return;
  const std::vector<Sequence*>& running = scheduler_->running();
  const auto n_decoding = static_cast<int32_t>(std::count_if(
      running.begin(), running.end(), [](const Sequence* s) { return s->n_pending() == 1; }));
  for (Sequence* seq : running) {
    if (seq->in_flight) continue;  // its draft is being verified
    auto& r = *static_cast<Request*>(seq);
    r.draft.clear();
    // Prompt logits, fork branches waiting for the prompt and jump-forward's chunks have rows of
    // their own; a sequence decodes when only its last token is pending.
    if (!r.params.speculate || r.wants_prompt_logits || !r.branches.empty() || r.n_pending() != 1) {
      continue;
    }
    speculator_->propose(cache_->tree(), r.cache_namespace, r.tokens, n_decoding, r.spec, r.draft);
    // (The draft model's guesses come after planning: its verification filters them.)
    if (r.grammar && r.spec.source != DraftSource::DRAFT_MODEL) keep_grammatical_draft(r);
  }
}

void Engine::draft_with_model(const StepPlan& plan) {
  if (draft_model_ == nullptr) return;
  draft_jobs_.clear();
  for (const ScheduledChunk& c : plan.chunks) {
    auto& r = *static_cast<Request*>(c.seq);
    if (c.n_draft == 0 || r.spec.source != DraftSource::DRAFT_MODEL) continue;
    draft_jobs_.push_back({r.tokens, r.kv.block_table(), c.n_draft, r.draft.data()});
  }
  if (!draft_jobs_.empty()) draft_model_->draft(draft_jobs_);
}

void Engine::keep_grammatical_draft(Request& r) const {
  GrammarCursor cursor = *r.grammar;  // a copy: only the real tokens move the request's
  size_t kept = 0;
  for (; kept < r.draft.size(); ++kept) {
    const TokenId token = r.draft[kept];
    if (r.condition.is_stop_token(token)) break;
    const GrammarCursor::Advance advanced = cursor.advance(token);
    if (advanced == GrammarCursor::Advance::FAILED) break;
    if (advanced == GrammarCursor::Advance::COMPLETE) {
      ++kept;  // the output ends with it: nothing after it is sampled
      break;
    }
  }
  r.draft.resize(kept);
}

bool Engine::step() {
  propose_drafts();
  const Clock::time_point plan_start = Clock::now();
  const StepPlan& plan = scheduler_->plan();
  const double plan_ms = ms_between(plan_start, Clock::now());
  for (Sequence* seq : plan.admitted) {
    auto* r = static_cast<Request*>(seq);
    if (!r->started) {
      r->started = true;
      r->output.stats.queue_ms = ms_between(r->submitted, Clock::now());
    }
  }
  bool ran = false;
  if (!plan.empty()) {
    draft_with_model(plan);
    batch_.clear();
    for (const ScheduledChunk& c : plan.chunks) {
      const TokenId* input = c.seq->tokens.data() + c.begin;  // a view, not a copy
      if (c.n_draft > 0) {
        auto& r = *static_cast<Request*>(c.seq);
        r.draft_input.assign(1, *input);
        r.draft_input.insert(r.draft_input.end(), r.draft.begin(), r.draft.begin() + c.n_draft);
        input = r.draft_input.data();
      }
      batch_.add_sequence(input, c.n_tokens, c.begin, c.seq->kv.block_table(), c.n_logit_rows());
    }
    InFlightStep& sent = in_flight_[(in_flight_head_ + n_in_flight_) % in_flight_.size()];
    ++n_in_flight_;
    sent.plan.chunks.assign(plan.chunks.begin(), plan.chunks.end());
    sent.n_output_rows = batch_.output_rows.size();
    if (Status launched = launch(sent); !launched.ok()) {
      fail(launched.error().message);
      return true;
    }
    for (const ScheduledChunk& c : plan.chunks) c.seq->in_flight = true;
    max_in_flight_ = std::max(max_in_flight_, n_in_flight_);
    ran = true;
  }
  // The oldest step comes back when the executor is full, or when nothing more could be sent.
  // A step that prefills comes back before the next is planned: the prefixes it caches must be
  // there when the next admissions look for them (decode steps cache nothing until they end).
  const bool prefills = std::any_of(plan.chunks.begin(), plan.chunks.end(),
                                    [](const ScheduledChunk& c) { return c.n_known() > 1; });
  if (n_in_flight_ > 0 && (n_in_flight_ == in_flight_.size() || plan.empty())) {
    collect_oldest();
    ran = true;
  }
  while (prefills && n_in_flight_ > 0) collect_oldest();
  refresh_stats(static_cast<int64_t>(plan.preempted.size()), plan_ms);
  return ran;
}

Status Engine::launch(const InFlightStep& step) {
  logits_.reserve(step.n_output_rows, size_t(n_vocab_));
  return executor_->launch(batch_);
}

void Engine::collect_oldest() {
  InFlightStep& step = in_flight_[in_flight_head_];
  in_flight_head_ = (in_flight_head_ + 1) % in_flight_.size();
  --n_in_flight_;
  logits_.reserve(step.n_output_rows, size_t(n_vocab_));
  for (const ScheduledChunk& c : step.plan.chunks) c.seq->in_flight = false;
  const Clock::time_point collect_start = Clock::now();
  if (Status collected = executor_->collect(logits_.data()); !collected.ok()) {
    fail(collected.error().message);
    return;
  }
  if (speculator_ != nullptr) time_decode_step(step.plan, ms_between(collect_start, Clock::now()));
  scheduler_->complete(step.plan);
  // The output rows come chunk by chunk, each chunk's last n_logit_rows() rows in order.
  size_t out = 0;
  for (const ScheduledChunk& c : step.plan.chunks) {
    const int32_t n_rows = c.n_logit_rows();
    if (n_rows == 0) continue;
    auto& request = *static_cast<Request*>(c.seq);
    const float* rows = logits_.data() + out * size_t(n_vocab_);
    out += static_cast<size_t>(n_rows);
    if (request.wants_prompt_logits) keep_prompt_logits(request, c, rows, n_rows);
    if (c.n_draft > 0)
      verify_draft(request, rows, c.n_draft);
    else if (c.wants_logits())
      on_logits(request, rows + size_t(n_rows - 1) * size_t(n_vocab_));
  }
}

void Engine::time_decode_step(const StepPlan& plan, double ms) {
  // (With depth 1 the forward pass runs in collect(), so this is its time.)
  int32_t rows = 0;
  for (const ScheduledChunk& c : plan.chunks) {
    if (c.n_known() != 1) return;  // a prefill's rows cost differently (longer attention)
    rows += c.n_tokens;
  }
  speculator_->step_took(rows, ms);
}

void Engine::fail(const std::string& why) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    first = failure_.empty();
    failure_ = why;
  }
  failed_ = why;
  if (first) {
    std::fprintf(stderr, "error: %s; the engine stops\n", why.c_str());
    // Told before any request ends: whoever waits on one sees the engine stopped.
    if (on_failure_) on_failure_(why);
  }
  // What was in flight never comes back: its sequences end below like the rest.
  for (; n_in_flight_ > 0; --n_in_flight_) {
    for (const ScheduledChunk& c : in_flight_[in_flight_head_].plan.chunks)
      c.seq->in_flight = false;
    in_flight_head_ = (in_flight_head_ + 1) % in_flight_.size();
  }
  for (const auto& r : std::vector<std::shared_ptr<Request>>(active_)) {
    if (r->state == SequenceState::FINISHED) continue;
    r->output.error = why;
    finish(*r, FinishReason::ERROR);
  }
  cache_->discard();  // what the failed step wrote is not to be reused, here or on disk
  refresh_stats(0, 0);
}

void Engine::refresh_stats(int64_t n_new_preemptions, double plan_ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.n_forced_tokens = n_forced_tokens_;
  stats_.n_blocks_free = blocks_->n_free();
  stats_.n_blocks_in_use = blocks_->n_in_use();
  stats_.n_blocks_cached = blocks_->n_cached();
  stats_.n_blocks_allocated = blocks_->n_allocated();
  stats_.n_blocks_acquired = blocks_->n_acquired();
  stats_.n_blocks_evicted = blocks_->n_evicted();
  stats_.peak_blocks_in_use = blocks_->peak_in_use();
  if (pages_ != nullptr) {
    stats_.n_window_pages_total = pages_->n_total();
    stats_.n_window_pages_held = pages_->n_held();
    stats_.n_window_pages_evictable = pages_->n_evictable();
    stats_.peak_window_pages_held = pages_->peak_held();
    stats_.n_window_pages_evicted = pages_->n_evicted();
  }
  stats_.n_running = static_cast<int32_t>(scheduler_->running().size());
  stats_.n_waiting = static_cast<int32_t>(scheduler_->waiting().size());
  stats_.n_cache_leaves = cache_->tree().n_leaves();
  stats_.n_steps = scheduler_->n_steps();
  stats_.n_preemptions += n_new_preemptions;
  stats_.scheduler_ms += plan_ms;
  stats_.max_steps_in_flight = static_cast<int32_t>(max_in_flight_);
  if (speculator_ != nullptr) stats_.drafts = speculator_->counts();
  if (draft_model_ != nullptr) stats_.n_draft_model_rows = draft_model_->n_rows_computed();
  if (disk_ != nullptr) {
    const DiskLoadCounters& loads = disk_->load_counters();
    stats_.n_disk_hit_tokens = loads.n_hit_tokens;
    stats_.disk_load_ms = loads.load_ms;
    stats_.n_disk_loads = loads.n_loads;
    stats_.n_disk_loads_staged = loads.n_loads_staged;
  }
}

void Engine::keep_prompt_logits(Request& request, const ScheduledChunk& chunk, const float* logits,
                                int32_t n_rows) {
  std::vector<std::vector<float>>& kept = request.output.prompt_logits;
  kept.resize(static_cast<size_t>(request.n_prompt));
  // Row i of `logits` is position first + i. After a preemption the prompt is computed again and
  // the same rows arrive again, with the same values (the kernels are batch-invariant).
  const int32_t first = chunk.begin + chunk.n_tokens - n_rows;
  for (int32_t i = 0; i < n_rows && first + i < request.n_prompt; ++i) {
    const float* row = logits + size_t(i) * size_t(n_vocab_);
    kept[static_cast<size_t>(first + i)].assign(row, row + n_vocab_);
  }
}

void Engine::on_logits(Request& request, const float* logits) {
  if (request.params.max_tokens == 0) {  // a warm-up: the prompt is cached, nothing to sample
    finish(request, FinishReason::LENGTH);
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

void Engine::verify_draft(Request& r, const float* rows, int32_t n_draft) {
  // Row i holds the logits after the draft's first i tokens. Position n_computed - 1 + i (the
  // input of row i) holds what the request would have computed there while the draft's first i
  // tokens are the ones sampled; the first mismatch's sample is the token after them.
  const int32_t first_new = r.size();
  int32_t accepted = 0;
  FinishReason finished = FinishReason::NONE;
  for (int32_t i = 0; i <= n_draft; ++i) {
    finished = sample_token(r, rows + size_t(i) * size_t(n_vocab_));
    if (finished != FinishReason::NONE || i == n_draft) break;
    const bool same = r.size() == first_new + i + 1 && r.tokens.back() == r.draft[size_t(i)];
    if (!same) break;  // (a grammar's forced tokens also end it: they follow the real token)
    ++accepted;
    ++r.n_computed;  // the draft token's KV is the request's own now
  }
  if (r.spec.source == DraftSource::DRAFT_MODEL) {
    // The draft model computed its KV of the guesses it was fed, all but the last one.
    draft_model_->confirm(r.kv.block_table(), first_new,
                          first_new + std::min(accepted, n_draft - 1));
  }
  speculator_->verified(r.spec, n_draft, accepted);
  r.output.stats.n_draft_tokens += n_draft;
  r.output.stats.n_accepted_tokens += accepted;
  if (finished != FinishReason::NONE) {
    finish(r, finished);  // caches positions [0, n_computed): verified tokens only
    return;
  }
  r.draft.clear();
  cache_->trim(r.kv, r.size());  // the rejected guesses' blocks
}

void Engine::sample_and_emit(Request& r, const float* logits) {
  const FinishReason finished = sample_token(r, logits);
  if (finished != FinishReason::NONE) finish(r, finished);
}

FinishReason Engine::sample_token(Request& r, const float* logits) {
  const std::span<const float> row(logits, static_cast<size_t>(n_vocab_));
  std::span<const float> sample_row = row;
  if (r.grammar) {
    if (!r.grammar->mask(row, r.condition.stop_token_ids, r.masked_logits)) {
      r.output.error = r.grammar->grammar().automaton().overflowed()
                           ? "the grammar is too ambiguous to follow (its automaton is full)"
                           : "no token of the vocabulary continues the grammar here";
      return FinishReason::ERROR;
    }
    sample_row = r.masked_logits;
  }
  const TokenId next = r.sampler->sample(sample_row, r.tokens);
  if (r.params.return_logits) r.output.logits.emplace_back(row.begin(), row.end());
  if (r.params.logprobs >= 0 && !r.condition.is_stop_token(next)) {
    Logprobs entry = compute_logprobs(row, next, r.params.logprobs);
    std::lock_guard<std::mutex> lock(r.channel->mutex);
    r.channel->logprobs.push_back(entry);
    r.output.logprobs.push_back(std::move(entry));
  }
  if (r.output.stats.ttft_ms == 0) r.output.stats.ttft_ms = ms_between(r.submitted, Clock::now());
  std::string& text = r.step_text;  // reserved at submission: appending does not allocate
  text.clear();
  FinishReason finished = r.stop->push(next, text);
  if (!r.condition.is_stop_token(next)) {
    r.tokens.push_back(next);
    r.output.tokens.push_back(next);
    ++r.n_tokens_unshown;
    if (r.grammar && finished == FinishReason::NONE) {
      const GrammarCursor::Advance advanced = r.grammar->advance(next);
      if (advanced == GrammarCursor::Advance::COMPLETE)
        finished = r.stop->finish(FinishReason::STOP, text);
      else if (advanced == GrammarCursor::Advance::CONTINUE)
        finished = append_forced_tokens(r, text);
    }
  }
  // The next step computes position size() - 1, which must lie inside the context.
  if (finished == FinishReason::NONE && r.size() > n_ctx_) {
    finished = r.stop->finish(FinishReason::LENGTH, text);
  }
  if (!text.empty()) {
    r.output.text += text;
    if (r.events.on_text) {
      r.events.on_text(text, std::exchange(r.n_tokens_unshown, 0));
    } else {
      std::lock_guard<std::mutex> lock(r.channel->mutex);
      r.channel->pending_text += text;
      r.channel->changed.notify_all();
    }
  }
  return finished;
}

FinishReason Engine::append_forced_tokens(Request& r, std::string& text) {
  if (!jump_forward_ || r.params.logprobs >= 0 || r.params.return_logits) return FinishReason::NONE;
  // Each forced token becomes one more position to compute; stay inside the context and the
  // request's reserved size.
  const int32_t room = std::min(n_ctx_, r.max_size > 0 ? r.max_size : n_ctx_) - r.size();
  if (room <= 0) return FinishReason::NONE;
  constexpr size_t kMaxForcedBytes = 256;
  const std::vector<TokenId> forced = r.grammar->forced_tokens(kMaxForcedBytes);
  FinishReason finished = FinishReason::NONE;
  for (size_t i = 0; i < forced.size() && static_cast<int32_t>(i) < room; ++i) {
    const TokenId token = forced[i];
    finished = r.stop->push(token, text);
    r.tokens.push_back(token);
    r.output.tokens.push_back(token);
    ++r.n_tokens_unshown;
    ++r.output.stats.n_forced_tokens;
    ++n_forced_tokens_;
    if (finished != FinishReason::NONE) break;
    const GrammarCursor::Advance advanced = r.grammar->advance(token);
    if (advanced == GrammarCursor::Advance::COMPLETE)
      return r.stop->finish(FinishReason::STOP, text);
    if (advanced == GrammarCursor::Advance::FAILED) {  // forced_tokens() spelled it: cannot be
      r.output.error = "jump-forward left the grammar";
      return FinishReason::ERROR;
    }
  }
  return finished;
}

void Engine::finish(Request& r, FinishReason reason) {
  if (r.state != SequenceState::FINISHED) scheduler_->remove(&r);
  // The n-gram pool learns what the request generated (its prompt is prompt lookup's), with the
  // few tokens before that key its first n-grams.
  if (speculator_ != nullptr && reason != FinishReason::ERROR && r.admitted_once) {
    const size_t context = static_cast<size_t>(speculator_->config().pool.n);
    const size_t from = static_cast<size_t>(r.n_prompt) - std::min(context, size_t(r.n_prompt));
    speculator_->learn(std::span<const TokenId>(r.tokens).subspan(from));
  }
  for (const std::shared_ptr<Request>& b : r.branches) {  // a fork leader ended before forking
    if (b->state != SequenceState::FINISHED)
      finish(*b, reason == FinishReason::CANCELLED ? reason : FinishReason::ERROR);
  }
  r.branches.clear();
  RequestStats& stats = r.output.stats;
  stats.n_cached_tokens = r.n_cached_tokens;
  stats.n_disk_cached_tokens = std::min(r.n_disk_tokens, r.n_cached_tokens);
  stats.n_generated_tokens = static_cast<int32_t>(r.output.tokens.size());
  stats.n_blocks_allocated = r.n_blocks_allocated;
  stats.n_blocks_acquired = r.n_blocks_acquired;
  stats.n_preemptions = r.n_preemptions;
  stats.total_ms = ms_between(r.submitted, Clock::now());
  r.output.finish_reason = reason;
  if (reason == FinishReason::ERROR && r.output.error.empty())
    r.output.error = "the request it forked from failed";
  refresh_stats(0, 0);  // before anyone learns of the end: the figures show its blocks back
  {
    std::lock_guard<std::mutex> lock(r.channel->mutex);
    r.channel->output = std::move(r.output);
    r.channel->finished = true;
    r.channel->changed.notify_all();
  }
  if (r.events.on_end) r.events.on_end(r.channel->output);  // read-only once finished
  auto it = std::find_if(active_.begin(), active_.end(),
                         [&](const std::shared_ptr<Request>& a) { return a.get() == &r; });
  if (it != active_.end()) active_.erase(it);
}

}  // namespace trellis
