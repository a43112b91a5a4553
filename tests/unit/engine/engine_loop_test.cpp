// The engine loop driven by a scripted executor instead of a model: planning, batching, the
// prefix cache, preemption, cancellation, forks, steps in flight and a failing executor, all
// without weights.
//
// The script is a toy model that depends on the whole context through the KV cache: each row
// writes its token into its KV slot, and the next token after position p is a hash of the tokens
// read back from the sequence's blocks at positions [0, p]. So a wrong block table, a shared
// block overwritten, or a logits row handed to the wrong sequence changes the output, which the
// tests compare with the hash computed directly on the token list.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include "engine/engine.h"
#include "model/synth_vocab.h"

namespace trellis {
namespace {

constexpr int32_t kVocab = 300;
constexpr TokenId kFirstScriptToken = 3;  // after <unk>, <s>, </s>: the script never ends a reply

// The script's next token after `context` (every token so far, the last one included).
TokenId scripted_next(std::span<const TokenId> context) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < context.size(); ++i) {
    h = (h ^ static_cast<uint64_t>(context[i] + 1) * (i + 7)) * 1099511628211ull;
  }
  return kFirstScriptToken + static_cast<TokenId>(h % (kVocab - kFirstScriptToken));
}

// The tokens a greedy request generates, computed without the engine.
std::vector<TokenId> expected_tokens(std::vector<TokenId> context, int32_t n) {
  std::vector<TokenId> out;
  for (int32_t i = 0; i < n; ++i) {
    out.push_back(scripted_next(context));
    context.push_back(out.back());
  }
  return out;
}

// What the test can see of, and do to, the executor while the engine owns it.
struct Script {
  std::mutex mutex;
  std::condition_variable released;
  bool hold_launches = false;  // while true, launch waits (so submissions can pile up)
  int32_t depth = 1;
  int64_t n_launched = 0;
  int64_t n_collected = 0;
  int64_t max_rows_seen = 0;
  int64_t max_sequences_seen = 0;
  int64_t fail_launch_at = -1;   // the launch (0-based) that fails, or -1
  int64_t fail_collect_at = -1;  // the collect (0-based) that fails, or -1
};

// Lets launches held by `hold_launches` go on.
void release_launches(Script& script) {
  {
    std::lock_guard<std::mutex> lock(script.mutex);
    script.hold_launches = false;
  }
  script.released.notify_all();
}

class ScriptedExecutor final : public StepExecutor {
 public:
  ScriptedExecutor(KvStorage& kv, std::shared_ptr<Script> script)
      : kv_(kv), script_(std::move(script)) {}

  int32_t depth() const override { return script_->depth; }
  int n_threads() const override { return 1; }
  std::vector<StageStats> stage_stats() const override { return {}; }

  Status launch(const ForwardBatch& batch) override {
    {
      std::unique_lock<std::mutex> lock(script_->mutex);
      script_->released.wait(lock, [&] { return !script_->hold_launches; });
      if (script_->n_launched++ == script_->fail_launch_at) return Error{"scripted launch failure"};
      script_->max_rows_seen = std::max<int64_t>(script_->max_rows_seen, batch.n_rows());
      script_->max_sequences_seen =
          std::max<int64_t>(script_->max_sequences_seen, std::ssize(batch.sequences));
    }
    EXPECT_LT(std::ssize(in_flight_), depth()) << "more steps in flight than the executor allows";
    // K/V first, for every row (as each layer of a model writes before it attends), then the
    // logits of the output rows from what the blocks hold.
    for (const BatchSequence& seq : batch.sequences) {
      for (int32_t row = seq.row_begin; row < seq.row_end; ++row)
        slot(seq, batch.positions[row]) = static_cast<float>(batch.tokens[row]);
    }
    std::vector<TokenId> next;
    for (int32_t row : batch.output_rows) {
      const BatchSequence& seq = sequence_of(batch, row);
      std::vector<TokenId> context;
      for (int32_t p = 0; p <= batch.positions[row]; ++p)
        context.push_back(static_cast<TokenId>(slot(seq, p)));
      next.push_back(scripted_next(context));
    }
    in_flight_.push_back(std::move(next));
    return {};
  }

  Status collect(float* logits) override {
    {
      std::lock_guard<std::mutex> lock(script_->mutex);
      if (script_->n_collected++ == script_->fail_collect_at)
        return Error{"scripted collect failure"};
    }
    EXPECT_FALSE(in_flight_.empty()) << "collect without a step in flight";
    if (in_flight_.empty()) return Error{"nothing in flight"};
    const std::vector<TokenId> next = std::move(in_flight_.front());
    in_flight_.pop_front();
    for (size_t i = 0; i < next.size(); ++i) {
      float* row = logits + i * kVocab;
      std::fill(row, row + kVocab, 0.0f);
      row[next[i]] = 10.0f;
    }
    return {};
  }

 private:
  float& slot(const BatchSequence& seq, int32_t position) {
    const int32_t B = kv_.layout().block_size;
    const int32_t block = seq.block_table[static_cast<size_t>(position / B)];
    return reinterpret_cast<float*>(kv_.keys(block, 0, 0))[position % B];
  }
  static const BatchSequence& sequence_of(const ForwardBatch& batch, int32_t row) {
    for (const BatchSequence& seq : batch.sequences) {
      if (row >= seq.row_begin && row < seq.row_end) return seq;
    }
    ADD_FAILURE() << "output row " << row << " belongs to no sequence";
    return batch.sequences.front();
  }

  KvStorage& kv_;
  std::shared_ptr<Script> script_;
  std::deque<std::vector<TokenId>> in_flight_;
};

struct Options {
  int32_t depth = 1;
  int32_t block_size = 4;
  int64_t kv_tokens = 256;
  int32_t n_ctx = 128;
  int32_t max_seqs = 8;
  int32_t max_batch_tokens = 32;
  bool prefix_cache = true;
};

std::unique_ptr<Engine> make_engine(const Options& o, std::shared_ptr<Script> script,
                                    std::function<void(const std::string&)> on_failure = {}) {
  script->depth = o.depth;
  EngineBackend backend;
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::create(make_synth_vocab(kVocab));
  EXPECT_TRUE(tokenizer.ok());
  backend.tokenizer = std::move(tokenizer).value();
  backend.kv_layout = KvLayout{.n_layer = 1, .n_kv_heads = 1, .head_dim = 1};
  backend.n_ctx = o.n_ctx;
  backend.make_executor = [script](KvStorage& kv) -> Result<std::unique_ptr<StepExecutor>> {
    return std::unique_ptr<StepExecutor>(std::make_unique<ScriptedExecutor>(kv, script));
  };
  EngineConfig config;
  config.block_size = o.block_size;
  config.kv_types = KvTypes::both(KvType::F32);  // token ids stored exactly
  config.kv_tokens = o.kv_tokens;
  config.prefix_cache.enabled = o.prefix_cache;
  config.scheduler.max_seqs = o.max_seqs;
  config.scheduler.max_batch_tokens = o.max_batch_tokens;
  config.on_failure = std::move(on_failure);
  Result<std::unique_ptr<Engine>> engine = Engine::create(std::move(backend), config);
  EXPECT_TRUE(engine.ok()) << (engine.ok() ? "" : engine.error().message);
  return engine.ok() ? std::move(engine).value() : nullptr;
}

// A prompt of n tokens; `seed` varies it.
std::vector<TokenId> prompt_of(int32_t n, int32_t seed) {
  std::vector<TokenId> p;
  for (int32_t i = 0; i < n; ++i) p.push_back(kFirstScriptToken + (seed * 31 + i * 7) % 200);
  return p;
}

// Waits for the end of a request, failing the test (not hanging it) after `limit`.
const RequestOutput* wait_for_end(RequestHandle& h,
                                  std::chrono::seconds limit = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!h.finished()) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "the request did not end within " << limit.count() << " s";
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return &h.wait();
}

// Every block is back: free or cached, none held by a request, and the bookkeeping agrees.
void expect_all_blocks_returned(Engine& engine) {
  ASSERT_TRUE(engine.check_invariants().ok());
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.n_blocks_in_use, 0);
  EXPECT_EQ(s.n_blocks_free + s.n_blocks_cached, s.n_blocks_total);
}

TEST(EngineLoop, OneRequestFollowsTheScript) {
  auto script = std::make_shared<Script>();
  auto engine = make_engine({}, script);
  ASSERT_NE(engine, nullptr);
  const std::vector<TokenId> prompt = prompt_of(10, 1);
  Result<RequestOutput> out = engine->run(greedy_request(prompt, 12));
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(out->tokens, expected_tokens(prompt, 12));
  EXPECT_EQ(out->finish_reason, FinishReason::LENGTH);
  EXPECT_EQ(out->stats.n_generated_tokens, 12);
  expect_all_blocks_returned(*engine);
}

// Many requests at once: they share steps (several sequences per batch) and each gets the tokens
// it gets alone.
TEST(EngineLoop, ConcurrentRequestsGetTheirOwnTokens) {
  for (int32_t depth : {1, 2, 3}) {
    SCOPED_TRACE("depth " + std::to_string(depth));
    auto script = std::make_shared<Script>();
    script->hold_launches = true;  // a busy machine must not let the first request run alone
    Options o;
    o.depth = depth;
    auto engine = make_engine(o, script);
    ASSERT_NE(engine, nullptr);
    std::vector<RequestHandle> handles;
    std::vector<std::vector<TokenId>> prompts;
    for (int32_t i = 0; i < 6; ++i) {
      prompts.push_back(prompt_of(5 + 3 * i, i));
      Result<RequestHandle> h = engine->submit(greedy_request(prompts.back(), 10 + i));
      EXPECT_TRUE(h.ok());
      if (h.ok()) handles.push_back(*h);
    }
    release_launches(*script);
    for (size_t i = 0; i < handles.size(); ++i) {
      const RequestOutput* out = wait_for_end(handles[i]);
      ASSERT_NE(out, nullptr);
      EXPECT_EQ(out->tokens, expected_tokens(prompts[i], 10 + static_cast<int32_t>(i)));
    }
    EXPECT_GT(script->max_sequences_seen, 1) << "the requests never shared a step";
    if (depth > 1) {
      EXPECT_EQ(engine->stats().max_steps_in_flight, depth);
    }
    expect_all_blocks_returned(*engine);
  }
}

// A second request with the same prefix takes it from the cache and gets the same tokens as with
// the cache off.
TEST(EngineLoop, PrefixCacheServesTheSharedPrefixExactly) {
  const std::vector<TokenId> system = prompt_of(20, 7);
  std::vector<TokenId> a = system, b = system;
  a.insert(a.end(), {10, 11, 12});
  b.insert(b.end(), {20, 21});
  for (bool cache : {false, true}) {
    SCOPED_TRACE(cache ? "cache on" : "cache off");
    auto script = std::make_shared<Script>();
    Options o;
    o.prefix_cache = cache;
    auto engine = make_engine(o, script);
    ASSERT_NE(engine, nullptr);
    Result<RequestOutput> first = engine->run(greedy_request(a, 8));
    Result<RequestOutput> second = engine->run(greedy_request(b, 8));
    ASSERT_TRUE(first.ok() && second.ok());
    EXPECT_EQ(first->tokens, expected_tokens(a, 8));
    EXPECT_EQ(second->tokens, expected_tokens(b, 8));
    // Blocks of 4: the 20 shared tokens are 5 whole blocks.
    EXPECT_EQ(second->stats.n_cached_tokens, cache ? 20 : 0);
    expect_all_blocks_returned(*engine);
  }
}

// A pool too small for every running sequence preempts some; they resume and still follow the
// script, and every block comes back.
TEST(EngineLoop, PreemptedRequestsResumeExactly) {
  auto script = std::make_shared<Script>();
  script->hold_launches = true;  // all six compete for the pool, however busy the machine
  Options o;
  o.kv_tokens = 64;  // 16 blocks of 4; six requests of up to 34 tokens need far more
  o.n_ctx = 60;
  auto engine = make_engine(o, script);
  ASSERT_NE(engine, nullptr);
  std::vector<RequestHandle> handles;
  std::vector<std::vector<TokenId>> prompts;
  for (int32_t i = 0; i < 6; ++i) {
    prompts.push_back(prompt_of(10, 100 + i));
    Result<RequestHandle> h = engine->submit(greedy_request(prompts.back(), 24));
    EXPECT_TRUE(h.ok());
    if (h.ok()) handles.push_back(*h);
  }
  release_launches(*script);
  int32_t n_preempted = 0;
  for (size_t i = 0; i < handles.size(); ++i) {
    const RequestOutput* out = wait_for_end(handles[i]);
    ASSERT_NE(out, nullptr);
    EXPECT_EQ(out->tokens, expected_tokens(prompts[i], 24));
    n_preempted += out->stats.n_preemptions;
  }
  EXPECT_GT(n_preempted, 0) << "the pool was large enough: nothing was preempted";
  EXPECT_EQ(engine->stats().n_preemptions, n_preempted);
  expect_all_blocks_returned(*engine);
}

// Cancelling from the text callback ends the request at once with what it has, and its blocks go
// back; the other requests go on unharmed.
TEST(EngineLoop, CancelEndsTheRequestAndReturnsItsBlocks) {
  auto script = std::make_shared<Script>();
  auto engine = make_engine({}, script);
  ASSERT_NE(engine, nullptr);
  // The callback runs on the engine's thread once the handle exists (submit returned it).
  std::promise<RequestHandle> handle_promise;
  std::shared_future<RequestHandle> handle_future = handle_promise.get_future().share();
  Result<RequestHandle> h =
      engine->submit(greedy_request(prompt_of(8, 3), 100), [handle_future](std::string_view) {
        RequestHandle self = handle_future.get();
        self.cancel();
      });
  ASSERT_TRUE(h.ok());
  handle_promise.set_value(*h);
  const std::vector<TokenId> other = prompt_of(6, 4);
  Result<RequestOutput> other_out = engine->run(greedy_request(other, 20));
  const RequestOutput* out = wait_for_end(*h);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->finish_reason, FinishReason::CANCELLED);
  EXPECT_LT(out->stats.n_generated_tokens, 100);
  ASSERT_TRUE(other_out.ok());
  EXPECT_EQ(other_out->tokens, expected_tokens(other, 20));
  expect_all_blocks_returned(*engine);
}

// A fork prefills the prompt once; greedy branches all follow the script.
TEST(EngineLoop, ForkBranchesSharePromptBlocks) {
  auto script = std::make_shared<Script>();
  auto engine = make_engine({}, script);
  ASSERT_NE(engine, nullptr);
  const std::vector<TokenId> prompt = prompt_of(17, 9);
  Result<std::vector<RequestHandle>> branches = engine->fork(greedy_request(prompt, 9), 3);
  ASSERT_TRUE(branches.ok());
  for (RequestHandle& b : *branches) {
    const RequestOutput* out = wait_for_end(b);
    ASSERT_NE(out, nullptr);
    EXPECT_EQ(out->tokens, expected_tokens(prompt, 9));
  }
  EXPECT_GT(engine->stats().n_blocks_acquired, 0) << "the branches copied the prompt's blocks";
  expect_all_blocks_returned(*engine);
}

// The end event comes once per request, after its last text, with the output wait() returns; for
// the branches of a fork too, each with its index.
TEST(EngineLoop, EndEventComesOnceAfterTheLastText) {
  auto script = std::make_shared<Script>();
  auto engine = make_engine({}, script);
  ASSERT_NE(engine, nullptr);
  struct Seen {
    std::mutex mutex;
    std::string text[3];
    int n_ends[3] = {0, 0, 0};
    int32_t n_tokens[3] = {0, 0, 0};  // the sum of the text events' token counts
    bool text_complete_at_end[3] = {false, false, false};
    bool tokens_complete_at_end[3] = {false, false, false};
    FinishReason reason[3] = {};
  };
  auto seen = std::make_shared<Seen>();
  RequestEvents events;
  events.on_text = [seen](std::string_view t, int32_t n_tokens) {
    std::lock_guard<std::mutex> lock(seen->mutex);
    seen->text[0] += t;
    seen->n_tokens[0] += n_tokens;
  };
  events.on_end = [seen](const RequestOutput& out) {
    std::lock_guard<std::mutex> lock(seen->mutex);
    ++seen->n_ends[0];
    seen->text_complete_at_end[0] = seen->text[0] == out.text;
    seen->tokens_complete_at_end[0] = seen->n_tokens[0] == static_cast<int32_t>(out.tokens.size());
    seen->reason[0] = out.finish_reason;
  };
  Result<RequestHandle> h = engine->submit(greedy_request(prompt_of(9, 5), 7), std::move(events));
  ASSERT_TRUE(h.ok());
  const RequestOutput* out = wait_for_end(*h);
  ASSERT_NE(out, nullptr);
  ForkEvents fork_events;
  fork_events.on_text = [seen](int32_t branch, std::string_view t, int32_t n_tokens) {
    std::lock_guard<std::mutex> lock(seen->mutex);
    seen->text[1 + branch] += t;
    seen->n_tokens[1 + branch] += n_tokens;
  };
  fork_events.on_end = [seen](int32_t branch, const RequestOutput& o) {
    std::lock_guard<std::mutex> lock(seen->mutex);
    ++seen->n_ends[1 + branch];
    seen->text_complete_at_end[1 + branch] = seen->text[1 + branch] == o.text;
    seen->tokens_complete_at_end[1 + branch] =
        seen->n_tokens[1 + branch] == static_cast<int32_t>(o.tokens.size());
    seen->reason[1 + branch] = o.finish_reason;
  };
  Result<std::vector<RequestHandle>> branches =
      engine->fork(greedy_request(prompt_of(6, 6), 5), 2, std::move(fork_events));
  ASSERT_TRUE(branches.ok());
  for (RequestHandle& b : *branches) ASSERT_NE(wait_for_end(b), nullptr);
  std::lock_guard<std::mutex> lock(seen->mutex);
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ(seen->n_ends[i], 1);
    EXPECT_TRUE(seen->text_complete_at_end[i]) << "text came after the end event";
    EXPECT_TRUE(seen->tokens_complete_at_end[i]) << "the text events did not count every token";
    EXPECT_EQ(seen->reason[i], FinishReason::LENGTH);
    EXPECT_FALSE(seen->text[i].empty());
  }
  EXPECT_EQ(seen->text[0], out->text);
}

// Requests still queued when the engine is destroyed end as cancelled, each with its end event.
TEST(EngineLoop, DestroyingTheEngineEndsEveryRequest) {
  auto script = std::make_shared<Script>();
  Options o;
  o.max_seqs = 1;
  auto engine = make_engine(o, script);
  ASSERT_NE(engine, nullptr);
  auto n_ends = std::make_shared<std::atomic<int>>(0);
  std::vector<RequestHandle> handles;
  for (int32_t i = 0; i < 4; ++i) {
    RequestEvents events;
    events.on_end = [n_ends](const RequestOutput&) { ++*n_ends; };
    Result<RequestHandle> h = engine->submit(greedy_request(prompt_of(6, i), 100), events);
    ASSERT_TRUE(h.ok());
    handles.push_back(*h);
  }
  engine.reset();
  EXPECT_EQ(n_ends->load(), 4);
  for (RequestHandle& h : handles) {
    ASSERT_TRUE(h.finished());
    EXPECT_NE(h.wait().finish_reason, FinishReason::ERROR);
  }
}

// An executor that fails stops the engine for good: the requests running and queued end with its
// error, on_failure is told once, and later submissions are refused.
TEST(EngineLoop, FailingExecutorEndsEveryRequestWithItsError) {
  for (bool at_launch : {false, true}) {
    SCOPED_TRACE(at_launch ? "launch fails" : "collect fails");
    auto script = std::make_shared<Script>();
    (at_launch ? script->fail_launch_at : script->fail_collect_at) = 5;
    script->hold_launches = true;  // every request is in before the failure, however busy
    std::mutex mutex;
    std::vector<std::string> failures;
    Options o;
    o.max_seqs = 2;  // some requests still queued when it fails
    auto engine = make_engine(o, script, [&](const std::string& why) {
      std::lock_guard<std::mutex> lock(mutex);
      failures.push_back(why);
    });
    ASSERT_NE(engine, nullptr);
    std::vector<RequestHandle> handles;
    for (int32_t i = 0; i < 5; ++i) {
      Result<RequestHandle> h = engine->submit(greedy_request(prompt_of(6, i), 50));
      EXPECT_TRUE(h.ok());
      if (h.ok()) handles.push_back(*h);
    }
    release_launches(*script);
    for (RequestHandle& h : handles) {
      const RequestOutput* out = wait_for_end(h);
      ASSERT_NE(out, nullptr);
      EXPECT_EQ(out->finish_reason, FinishReason::ERROR);
      EXPECT_NE(out->error.find("scripted"), std::string::npos) << out->error;
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      EXPECT_EQ(failures.size(), 1u);
    }
    EXPECT_NE(engine->failure().find("scripted"), std::string::npos);
    Result<RequestHandle> late = engine->submit(greedy_request(prompt_of(4, 9), 4));
    ASSERT_FALSE(late.ok());
    EXPECT_NE(late.error().message.find("stopped"), std::string::npos);
  }
}

// Requests the engine cannot run are refused at submission, naming the problem.
TEST(EngineLoop, RefusesWhatCanNeverRun) {
  auto script = std::make_shared<Script>();
  auto engine = make_engine({}, script);
  ASSERT_NE(engine, nullptr);
  EXPECT_FALSE(engine->submit(greedy_request({}, 4)).ok());
  EXPECT_FALSE(engine->submit(greedy_request(prompt_of(129, 0), 4)).ok());  // n_ctx 128
  EXPECT_FALSE(engine->submit(greedy_request({5, kVocab}, 4)).ok());
  EXPECT_EQ(script->n_launched, 0);
}

}  // namespace
}  // namespace trellis
