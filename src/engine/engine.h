// The concurrent engine: one model, one KV block pool with its prefix cache, one scheduler and
// one background thread that runs batches. Callers' threads only submit requests and read their
// results, so many sessions share the pool and the tree: their decode steps are batched together
// and new prompts are prefilled in chunks between them (see sched/scheduler.h).
//
//   Engine::create(model, config) -> engine
//   engine.run(request)    -> the RequestOutput, once the request has ended
//   engine.submit(request) -> RequestHandle: next_text() to pull text as it comes (or the
//                             on_text event), cancel(), wait() for the RequestOutput (or the
//                             on_end event)
//   engine.fork(request, n) -> n handles sharing the prompt's blocks (prefilled once)
//   engine.warm(ns, prefix)   -> caches a prefix before the requests that use it
//
// Greedy outputs do not depend on what else runs: the kernels are batch-invariant and the prefix
// cache is exact, so N concurrent requests give the same tokens as the same requests run alone.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "cluster/pipeline.h"
#include "engine/logit_buffer.h"
#include "engine/step_executor.h"
#include "gguf/gguf_file.h"
#include "grammar/grammar.h"
#include "kv/block_pool.h"
#include "kv/kv_storage.h"
#include "kvdisk/disk_tier.h"
#include "model/model.h"
#include "prefix/prefix_cache.h"
#include "sample/logprobs.h"
#include "sample/sampling_params.h"
#include "sample/stop_condition.h"
#include "sched/scheduler.h"
#include "spec/draft_model.h"
#include "spec/speculator.h"
#include "tokenizer/tokenizer.h"

namespace trellis {

struct EngineConfig {
  int n_threads = 0;        // 0: all cores
  int32_t block_size = 32;  // KV tokens per block
  KvTypes kv_types;         // of keys and of values
  int32_t n_ctx = 0;        // tokens per sequence; 0: the model's training context
  // The pool: a memory budget in bytes, else a token count, else (both 0) four contexts. A pool
  // smaller than one context plus a block shortens the context so that one request always fits.
  int64_t kv_bytes = 0;
  int64_t kv_tokens = 0;
  PrefixCacheConfig prefix_cache;
  // Sliding-window layers (Gemma 3's local ones) keep every position's KV, as global layers do,
  // instead of their window only (llama.cpp's --swa-full). The disk tier and a pipeline imply it.
  bool swa_full = false;
  SchedulerConfig scheduler;  // its max_batch_tokens also sizes the forward pass's workspace
  // The model's layers split over processes, this one the first stage (null: all held here). It
  // must outlive the engine.
  Pipeline* pipeline = nullptr;
  // Called once, on the engine's thread, when the engine stops for good (a pipeline stage failed):
  // every request then ends with an error and later submissions are refused.
  std::function<void(const std::string& why)> on_failure;
  // The disk tier under the prefix cache (empty: none): blocks the pool evicts are written under
  // this directory, and prompts find their prefixes there again, across restarts (see
  // engine/disk_prefix.h). One process per directory. Needs the prefix cache, not a pipeline.
  std::string cache_dir;
  int64_t cache_disk_bytes = int64_t{20} << 30;      // the tier's budget
  std::function<void(const std::string&)> disk_log;  // its one-line notices; default stderr
  // Grammar-constrained requests: where the grammar admits one continuation only, append its
  // tokens as one prefill chunk instead of sampling them one by one (requests that ask for
  // logprobs or logits are always sampled token by token).
  bool jump_forward = true;
  // Speculative decoding: the sources of the drafts that decode steps verify (spec/speculator.h).
  // A decode step then computes a sequence's draft after its last token and keeps the tokens its
  // logits confirm, sampled as without speculation: greedy and seeded outputs are the same with
  // it on or off. Off with a pipeline of more than one process.
  SpeculationConfig speculation;
  // A GGUF model of the same vocabulary that drafts by greedy decoding where the cheaper sources
  // have nothing (DraftSource::DRAFT_MODEL; empty: none). Its KV takes as many blocks of its own
  // layout as the pool has, beyond kv_bytes. Needs the whole model in this process.
  std::string draft_model;
  // Told of every input of the model's weight matrices (model/activation_observer.h), on the
  // engine's thread; null: none. Must outlive the engine.
  ActivationObserver* activation_observer = nullptr;
};

struct EngineRequest {
  std::vector<TokenId> prompt;  // already tokenized, BOS included when wanted
  SamplingParams sampling;
  int32_t max_tokens = 128;       // 0: only cache the prompt (see Engine::warm)
  std::vector<std::string> stop;  // stop strings: generation ends before the first one
  bool ignore_eos = false;
  // More tokens that end generation like EOS (say a chat format's end of turn): finish reason
  // STOP, their text never emitted. Ignored with ignore_eos. Each must be inside the vocab.
  std::vector<TokenId> stop_token_ids;
  // Control tokens whose text goes into the output (a chat format's markup that the reply is
  // split by, harmony's <|channel|> ...); other control tokens yield no text.
  std::vector<TokenId> spelled_tokens;
  std::string cache_namespace;  // prefixes are shared only inside a namespace
  bool return_logits = false;   // keep the logits each token was sampled from
  // -1: none. k >= 0: each generated token's log-probability and its k most likely alternatives
  // (RequestOutput::logprobs, RequestHandle::logprobs_from while it runs), computed as the token
  // is sampled, so that a request keeps only what it returns.
  int32_t logprobs = -1;
  // Keep the logits of every prompt position (RequestOutput::prompt_logits). The whole prompt is
  // then computed, never served by the prefix cache (cached positions have no logits); with
  // max_tokens 0 nothing is generated.
  bool return_prompt_logits = false;
  // Constrains the output to the grammar's language (null: free text). The output ends (STOP) as
  // soon as nothing can follow; stop tokens are allowed only where the grammar may end. Requests
  // that share a grammar object share its cached token masks.
  std::shared_ptr<const Grammar> grammar;
  // false: this request's decode steps verify no drafts (EngineConfig::speculation).
  bool speculate = true;
};

// A greedy request that generates exactly max_tokens tokens (end of sequence ignored): the same
// work on every run, as tests and benchmarks want.
EngineRequest greedy_request(std::vector<TokenId> prompt, int32_t max_tokens);

struct RequestStats {
  int32_t n_prompt_tokens = 0;
  int32_t n_cached_tokens = 0;       // prompt tokens served by the prefix cache at admission
  int32_t n_disk_cached_tokens = 0;  // of those, the ones loaded from the disk tier for it
  double disk_load_ms = 0;           // reading them (while the request waited)
  int32_t n_generated_tokens = 0;
  int32_t n_forced_tokens = 0;    // of those, appended by jump-forward (a grammar's only way on)
  int32_t n_draft_tokens = 0;     // speculative decoding: draft tokens verified
  int32_t n_accepted_tokens = 0;  // of those, kept (generated without a step of their own)
  int32_t n_blocks_allocated = 0;
  int32_t n_blocks_acquired = 0;
  int32_t n_preemptions = 0;
  double queue_ms = 0;  // submission to first admission
  double ttft_ms = 0;   // submission to first token
  double total_ms = 0;  // submission to the end

  // Prefill: admission to the first token (the prompt tokens the cache did not serve).
  double prefill_ms() const { return ttft_ms - queue_ms; }
  // Decode: the steps after the first token (which comes out of the prefill).
  double decode_ms() const { return total_ms - ttft_ms; }
  double prefill_tokens_per_s() const;
  double decode_tokens_per_s() const;
};

struct RequestOutput {
  std::vector<TokenId> tokens;
  std::string text;
  // STOP, LENGTH, CANCELLED, or ERROR (then `error` says why).
  FinishReason finish_reason = FinishReason::NONE;
  std::string error;
  RequestStats stats;
  std::vector<std::vector<float>> logits;         // [token][n_vocab] when return_logits
  std::vector<Logprobs> logprobs;                 // [token] when logprobs >= 0
  std::vector<std::vector<float>> prompt_logits;  // [prompt position][n_vocab] when
                                                  // return_prompt_logits
};

// What a request tells its submitter as it runs. Both are called on the engine's thread (or, for
// a request that never started, on the thread that stops the engine): keep them short.
struct RequestEvents {
  // Each piece of text as it is produced, with the number of generated tokens it completes: the
  // tokens sampled since the previous piece, stop tokens not counted (a token whose text is held
  // back, an unfinished character or a possible stop string, counts with the piece that releases
  // it). So the piece's tokens are the next `n_tokens` logprob entries. Absent: pull the text
  // with RequestHandle::next_text.
  std::function<void(std::string_view text, int32_t n_tokens)> on_text;
  // Once, when the request has ended, after its last text: its whole output (finish reason,
  // error, stats), the same that RequestHandle::wait returns from then on.
  std::function<void(const RequestOutput& output)> on_end;
};

// The same for the branches of a fork, each event with its branch index.
struct ForkEvents {
  std::function<void(int32_t branch, std::string_view text, int32_t n_tokens)> on_text;
  std::function<void(int32_t branch, const RequestOutput& output)> on_end;
};

// An engine without a model file: what it needs in place of one. Tests drive the loop through a
// scripted executor this way, with no weights at all (tests/unit/engine/).
struct EngineBackend {
  std::unique_ptr<Tokenizer> tokenizer;  // its vocab is the model's
  // The blocks the executor reads and writes; block_size and type come from EngineConfig.
  KvLayout kv_layout;
  int32_t n_ctx = 0;  // tokens per sequence (the pool's size may shorten it, see size_kv_pool)
  // Called once the pool's storage exists, with it.
  std::function<Result<std::unique_ptr<StepExecutor>>(KvStorage& kv)> make_executor;
};

// The shared state between the engine loop and one request's handle.
struct RequestChannel;
class DiskPrefixTier;
class GrammarRegistry;
struct KvRuntime;

class RequestHandle {
 public:
  RequestHandle() = default;
  explicit RequestHandle(std::shared_ptr<RequestChannel> channel) : channel_(std::move(channel)) {}

  // Blocks until more text or the end: returns false at the end (then `text` is empty).
  // `text` receives all the text produced since the last call (one or more tokens' worth); pass
  // the same string each time to reuse its memory.
  bool next_text(std::string& text);
  // Blocks until the request ends.
  const RequestOutput& wait();
  // The logprobs of generated tokens `first` onwards that exist by now (logprobs >= 0): a token's
  // entry is there before its text is handed over.
  std::vector<Logprobs> logprobs_from(size_t first) const;
  // Those of tokens [first, first + count) (fewer where they do not exist yet).
  std::vector<Logprobs> logprobs_range(size_t first, size_t count) const;
  // Asks the engine to stop the request; its blocks are released within a step.
  void cancel();
  bool finished() const;
  uint64_t id() const;

 private:
  friend class Engine;
  std::shared_ptr<RequestChannel> channel_;
};

// Figures of the pool and the cache, readable from any thread.
struct EngineStats {
  int32_t n_blocks_total = 0;
  int32_t n_blocks_free = 0;
  int32_t n_blocks_in_use = 0;  // held by requests
  int32_t n_blocks_cached = 0;  // indexed by the tree
  int64_t n_blocks_allocated = 0;
  int64_t n_blocks_acquired = 0;
  int64_t n_blocks_evicted = 0;
  int32_t peak_blocks_in_use = 0;
  // Sliding-window layers' pages (kv/window_pages.h); all 0 when every layer lives in blocks.
  int32_t n_window_pages_total = 0;
  int32_t n_window_pages_held = 0;       // by requests, for their windows
  int32_t n_window_pages_evictable = 0;  // kept for the cache's prefixes
  int32_t peak_window_pages_held = 0;
  int64_t n_window_pages_evicted = 0;
  size_t block_bytes = 0;  // what one block holds (the layers not in window pages)
  size_t page_bytes = 0;   // what one window page holds (0: none)
  // The most KV memory requests held at once (their blocks and window pages; what only the cache
  // keeps is not counted: it goes when needed).
  size_t peak_kv_bytes_in_use() const {
    return static_cast<size_t>(peak_blocks_in_use) * block_bytes +
           static_cast<size_t>(peak_window_pages_held) * page_bytes;
  }
  int32_t n_running = 0;
  int32_t n_waiting = 0;
  int64_t n_cache_leaves = 0;  // radix tree leaves: cached sequences that extend no other
  int64_t n_steps = 0;
  int64_t n_preemptions = 0;
  int64_t n_forced_tokens = 0;      // tokens jump-forward appended instead of sampling, in total
  double scheduler_ms = 0;          // time spent planning steps, in total
  int32_t max_steps_in_flight = 0;  // the most steps down a pipeline at once (1 in one process)
  bool has_disk_tier = false;
  DiskTierStats disk;               // the disk tier's figures (when there is one)
  int64_t n_disk_hit_tokens = 0;    // prompt tokens cached from the disk tier, in total
  double disk_load_ms = 0;          // time the loader spent reading them, in total
  int64_t n_disk_loads = 0;         // requests that read blocks from the disk tier
  int64_t n_disk_loads_staged = 0;  // of those, read into memory of their own and copied into
                                    // the pool (it had no blocks to spare while they read)
  std::array<DraftCounts, kDraftSources> drafts{};  // speculative decoding, by DraftSource
  int64_t n_draft_model_rows = 0;  // rows the draft model computed (its catch-up and guesses)
};

class Engine {
 public:
  using Clock = std::chrono::steady_clock;

  // An engine over a GGUF model file: the forward pass runs here, or down config.pipeline.
  static Result<std::unique_ptr<Engine>> create(const std::string& model_path,
                                                const EngineConfig& config);
  // An engine over `backend`'s executor (no disk tier, no pipeline).
  static Result<std::unique_ptr<Engine>> create(EngineBackend backend, const EngineConfig& config);
  // Cancels whatever still runs and joins the loop.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request. Errors at once for what can never run: an empty prompt, a prompt longer
  // than the context, a token outside the vocab, bad sampling parameters or stop strings.
  // `events` tell of the request's text and end as they happen (see RequestEvents).
  //
  // Steps allocate nothing once requests are running: the request's buffers (tokens, block table,
  // text) are sized here, on the caller's thread, for the most it can generate; the engine only
  // appends to them. What the caller asks for per token is the exception: return_logits keeps a
  // vector per token and return_prompt_logits one per prompt position.
  Result<RequestHandle> submit(EngineRequest request, RequestEvents events);
  // The same with text events only, without their token counts.
  Result<RequestHandle> submit(EngineRequest request,
                               std::function<void(std::string_view)> on_text = {});
  // Submits the request and waits for its end: its output, or an error when it cannot be
  // submitted or fails (finish reason ERROR). on_text as in submit.
  Result<RequestOutput> run(EngineRequest request,
                            std::function<void(std::string_view)> on_text = {});
  // n requests that share the prompt's KV blocks: the prompt is prefilled once, then each branch
  // samples on its own (branch i uses seed derive_seed(request.sampling.seed, i)).
  // `events` as in submit, with the branch's index.
  Result<std::vector<RequestHandle>> fork(EngineRequest request, int32_t n, ForkEvents events = {});
  // n branches that continue a finished request's history (its prompt + output, still cached
  // unless evicted, so only its last token is recomputed): tree-of-thought style branching.
  // `params` gives the branches' sampling, max_tokens and stops; its prompt is replaced.
  Result<std::vector<RequestHandle>> fork(const RequestHandle& parent, int32_t n,
                                          EngineRequest params);
  // Caches `prefix` in namespace `ns` (a request with max_tokens 0) and waits for it.
  Status warm(const std::string& ns, std::vector<TokenId> prefix);

  // The figures as of the last step (or the last flush_cache / check_invariants call, or the end
  // of a request: a request's released blocks show here by the time its handle says finished).
  EngineStats stats() const;
  // Evicts every cached prefix (blocks of running requests stay). Waits for the loop, and with a
  // disk tier until the evicted blocks are written there.
  void flush_cache();
  // Checks the pool's and the tree's invariants on the loop's thread.
  Status check_invariants();

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  // The model and its GGUF file (metadata such as tokenizer.chat_template). Only for an engine
  // created from a file.
  const Model& model() const;
  const GgufFile& file() const;
  int32_t n_ctx() const { return n_ctx_; }
  int n_threads() const { return executor_->n_threads(); }
  // Bytes of K/V memory the pool holds (this process's layers' share, in a pipeline).
  size_t kv_bytes() const { return kv_->bytes(); }
  // Each pipeline stage's figures, this process first; empty when the model runs in one process.
  std::vector<StageStats> stage_stats() const { return executor_->stage_stats(); }
  // Why the engine stopped for good, or empty while it works.
  std::string failure() const;

 private:
  struct Request;
  Engine() = default;
  // Loads the model, sizes the pool and chooses the executor.
  Status init_from_file(const std::string& model_path, const EngineConfig& config);
  Status init_from_backend(EngineBackend backend, const EngineConfig& config);
  // What both share once the pool and the executor exist: the scheduler and the loop's buffers.
  Status init_loop(const EngineConfig& config);
  void adopt_kv(KvRuntime runtime);
  Status check_request(const EngineRequest& request) const;
  Result<std::shared_ptr<Request>> make_request(EngineRequest request, RequestEvents events);
  // Sizes the request's output buffers for the most it can generate (see engine.cpp).
  void reserve_output(Request& r) const;
  void loop();
  // Runs `fn` on the loop thread and waits for it.
  void run_on_loop(std::function<void()> fn);
  void take_submissions();
  void cancel_requested();
  // Plans and runs one batch; false when nothing could run.
  bool step();
  // Copies the pool's and the scheduler's figures into stats_ (loop thread).
  void refresh_stats(int64_t n_new_preemptions, double plan_ms);
  void on_logits(Request& request, const float* logits);
  void fork_branches(Request& parent, const float* logits);
  void sample_and_emit(Request& request, const float* logits);
  // Samples the next token from `logits` and emits it: sample_and_emit without the end. Returns
  // the finish reason it leads to (NONE: go on); the caller then calls finish().
  FinishReason sample_token(Request& request, const float* logits);
  // Sets the draft of every running sequence that decodes next (speculative decoding).
  void propose_drafts();
  // Tells the speculator what a step of decode tokens and drafts cost (prefill steps are left
  // out).
  void time_decode_step(const StepPlan& plan, double ms);
  // Has the draft model write the guesses of the planned chunks whose draft it is to make.
  void draft_with_model(const StepPlan& plan);
  // Loads config.draft_model to run on `threads` (the executor's).
  Status load_draft_model(const EngineConfig& config, ThreadPool& threads);
  // Cuts `request`'s draft before the first token its grammar refuses.
  void keep_grammatical_draft(Request& request) const;
  // Samples from a decode chunk's n_draft + 1 logit rows in order while the sampled tokens are
  // the draft's, keeping the KV of those positions.
  void verify_draft(Request& request, const float* rows, int32_t n_draft);
  // After a sampled token: appends the tokens the request's grammar forces (jump-forward) to
  // `text` and the request. Returns the finish reason they lead to (NONE: go on).
  FinishReason append_forced_tokens(Request& request, std::string& text);
  // Keeps the prompt rows of a chunk's logits (return_prompt_logits). `logits` holds the chunk's
  // last n_rows rows.
  void keep_prompt_logits(Request& request, const ScheduledChunk& chunk, const float* logits,
                          int32_t n_rows);
  void finish(Request& request, FinishReason reason);
  // The engine cannot go on (a pipeline stage failed): every request ends with `why`.
  void fail(const std::string& why);
  // A step launched on the executor whose logits are not consumed.
  struct InFlightStep {
    StepPlan plan;  // its chunks
    size_t n_output_rows = 0;
  };
  // Launches batch_ on the executor; collect_oldest() later finds the logits in logits_.
  Status launch(const InFlightStep& step);
  // Takes the oldest step's logits: completes its chunks and samples.
  void collect_oldest();
  // Debug builds: the pool's and the tree's invariants hold whenever the loop goes idle.
  void check_invariants_when_idle();
  Status open_disk_tier(const std::string& model_path, const EngineConfig& config);
  // When `r`'s prompt continues on the disk tier, has it read and makes `r` wait for that KV
  // (true); the loader hands it back through kv_arrived_.
  bool start_disk_load(const std::shared_ptr<Request>& r);
  // Caches what the loader read for `r`, which then waits for admission like any other.
  void finish_disk_load(Request& r);
  // Has the prefix of the request next to be admitted read back when the tier holds more of its
  // prompt than the pool (see engine.cpp).
  void reload_evicted_prefixes();
  // Ends the requests submitted but never taken by the loop (shutdown).
  void cancel_unstarted();
  // Ends a request that never reached the scheduler (and its fork branches) with `reason`.
  void end_unstarted(Request& r, FinishReason reason, const std::string& error);

  std::unique_ptr<GgufFile> file_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<KvStorage> kv_;
  std::unique_ptr<BlockPool> blocks_;
  std::unique_ptr<WindowPages> pages_;  // null without sliding-window layers kept apart
  std::unique_ptr<PrefixCache> cache_;
  std::unique_ptr<DiskPrefixTier> disk_;  // null without --cache-dir
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<StepExecutor> executor_;  // reads model_ and kv_: declared after them
  std::unique_ptr<GrammarRegistry> grammars_;
  std::unique_ptr<Speculator> speculator_;  // null when speculation is off
  std::unique_ptr<GgufFile> draft_file_;    // the draft model's weights
  // Null without one; reads blocks_, draft_file_ and executor_'s threads.
  std::unique_ptr<DraftModel> draft_model_;
  std::vector<DraftJob> draft_jobs_;  // a step's, reused
  bool jump_forward_ = true;
  int32_t n_ctx_ = 0;
  int32_t n_vocab_ = 0;
  std::function<void(const std::string&)> on_failure_;

  // Loop-thread state.
  std::vector<std::shared_ptr<Request>> active_;  // submitted, not finished
  ForwardBatch batch_;
  LogitBuffer logits_;                   // [rows][n_vocab], grown as needed
  std::vector<InFlightStep> in_flight_;  // a ring: n_in_flight_ steps from in_flight_head_
  size_t in_flight_head_ = 0;
  size_t n_in_flight_ = 0;
  size_t max_in_flight_ = 0;
  std::string failed_;           // failure_, as the loop thread knows it (read without the lock)
  int64_t n_forced_tokens_ = 0;  // jump-forward's tokens (EngineStats::n_forced_tokens)

  // Shared with callers, under mutex_.
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::shared_ptr<Request>> submitted_;
  std::vector<std::shared_ptr<Request>> kv_arrived_;  // their disk loads read, to be finished
  std::vector<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::string failure_;
  std::atomic<bool> cancel_pending_{false};
  EngineStats stats_;
  uint64_t next_id_ = 1;
  std::thread thread_;  // last: started after everything above exists
};

}  // namespace trellis
