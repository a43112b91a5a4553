// The concurrent engine on the tiny synthetic model: N concurrent requests give exactly what the
// same requests give alone (chunked prefill, preemption and eviction forced by a tiny pool), fork
// shares the prompt's blocks and matches independent runs, cancellation releases every block.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sample/rng.h"
#include "test_support.h"

namespace trellis {
namespace {

using Tokens = std::vector<TokenId>;
constexpr int32_t kContext = 128;
constexpr int32_t kBlock = 8;

const std::string& tiny_model_path() { return testing::tiny_engine_model(); }

EngineConfig base_config() {
  EngineConfig config;
  config.n_threads = 2;
  config.block_size = kBlock;
  config.n_ctx = kContext;
  return config;
}

std::unique_ptr<Engine> make_engine(const EngineConfig& config) {
  Result<std::unique_ptr<Engine>> engine = Engine::create(tiny_model_path(), config);
  EXPECT_TRUE(engine.ok()) << engine.error().message;
  return engine.ok() ? std::move(engine).value() : nullptr;
}

EngineRequest greedy(Tokens prompt, int32_t max_tokens) {
  return testing::greedy_request(std::move(prompt), max_tokens, /*return_logits=*/true);
}

// Prompts over two shared prefixes, with lengths around block boundaries.
std::vector<Tokens> random_prompts(uint32_t seed, int n) {
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<Tokens> prefixes(2);
  for (Tokens& p : prefixes) {
    for (int i = 0; i < 60; ++i) p.push_back(pick(3, 2000));
  }
  std::vector<Tokens> prompts;
  for (int i = 0; i < n; ++i) {
    const Tokens& prefix = prefixes[static_cast<size_t>(pick(0, 1))];
    const int shared = std::min(60, kBlock * pick(0, 6) + pick(-1, 1) + 1);
    Tokens t(prefix.begin(), prefix.begin() + shared);
    for (int k = pick(1, 30); k > 0; --k) t.push_back(pick(3, 2000));
    prompts.push_back(std::move(t));
  }
  return prompts;
}

using testing::expect_no_leak;

// Holds the engine's loop inside a request's on_text callback at its first piece of text, until
// release(): while it is held no step runs, so the test can act (cancel, fork, destroy) at a
// known point of the request's life instead of racing the generation. Declare it before the
// engine, so that it outlives the loop's last call.
class FirstPieceGate {
 public:
  std::function<void(std::string_view)> callback() {
    return [this](std::string_view text) {
      std::unique_lock<std::mutex> lock(mutex_);
      text_ += text;
      if (++n_pieces_ == 1) {
        changed_.notify_all();
        changed_.wait(lock, [&] { return released_; });
      }
    };
  }
  // True once the first piece arrived (false after a minute: the request never produced text).
  bool wait_reached() {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, std::chrono::minutes(1), [&] { return n_pieces_ > 0; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }
  std::string text() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return text_;
  }
  int n_pieces() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return n_pieces_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::string text_;
  int n_pieces_ = 0;
  bool released_ = false;
};

TEST(EngineTest, ConcurrentRequestsGiveWhatTheyGiveAlone) {
  const std::vector<Tokens> prompts = random_prompts(3, 14);
  const int32_t kMaxTokens = 12;

  // Alone: one at a time, cache off.
  EngineConfig alone_config = base_config();
  alone_config.prefix_cache.enabled = false;
  std::unique_ptr<Engine> alone = make_engine(alone_config);
  ASSERT_NE(alone, nullptr);
  std::vector<RequestOutput> want;
  for (const Tokens& p : prompts) {
    Result<RequestHandle> h = alone->submit(greedy(p, kMaxTokens));
    ASSERT_TRUE(h.ok()) << h.error().message;
    want.push_back(h->wait());
    ASSERT_EQ(want.back().finish_reason, FinishReason::LENGTH);
  }

  // Together: a pool of one context plus one block, small steps, cache on.
  EngineConfig together_config = base_config();
  together_config.kv_tokens = kContext + kBlock;
  together_config.scheduler.max_batch_tokens = 24;
  together_config.scheduler.max_seqs = 6;
  std::unique_ptr<Engine> together = make_engine(together_config);
  ASSERT_NE(together, nullptr);
  std::vector<RequestHandle> handles;
  for (const Tokens& p : prompts) {
    Result<RequestHandle> h = together->submit(greedy(p, kMaxTokens));
    ASSERT_TRUE(h.ok()) << h.error().message;
    handles.push_back(*h);
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const RequestOutput& got = handles[i].wait();
    ASSERT_EQ(got.finish_reason, FinishReason::LENGTH) << got.error;
    EXPECT_EQ(got.tokens, want[i].tokens) << "prompt " << i;
    ASSERT_EQ(got.logits.size(), want[i].logits.size());
    for (size_t s = 0; s < got.logits.size(); ++s) {
      ASSERT_EQ(got.logits[s], want[i].logits[s]) << "prompt " << i << " step " << s;
    }
  }
  const EngineStats stats = together->stats();
  EXPECT_GT(stats.n_preemptions, 0) << "the tiny pool should force preemption";
  EXPECT_GT(stats.n_blocks_evicted, 0);
  EXPECT_GT(stats.n_blocks_acquired, 0);
  expect_no_leak(*together);
  expect_no_leak(*alone);
}

TEST(EngineTest, ForkSharesThePromptAndEachBranchMatchesAnIndependentRun) {
  EngineRequest request;
  for (TokenId t = 0; t < 45; ++t) request.prompt.push_back(100 + t);
  request.max_tokens = 10;
  request.sampling.temperature = 0.9f;
  request.sampling.seed = 42;
  request.ignore_eos = true;

  std::unique_ptr<Engine> engine = make_engine(base_config());
  ASSERT_NE(engine, nullptr);
  Result<std::vector<RequestHandle>> branches = engine->fork(request, 3);
  ASSERT_TRUE(branches.ok()) << branches.error().message;
  std::vector<RequestOutput> outs;
  for (RequestHandle& h : *branches) outs.push_back(h.wait());

  EngineConfig off = base_config();
  off.prefix_cache.enabled = false;
  std::unique_ptr<Engine> independent = make_engine(off);
  ASSERT_NE(independent, nullptr);
  for (size_t i = 0; i < outs.size(); ++i) {
    EngineRequest alone = request;
    alone.sampling.seed = derive_seed(42, i);
    Result<RequestHandle> h = independent->submit(alone);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(outs[i].tokens, h->wait().tokens) << "branch " << i;
    EXPECT_EQ(outs[i].tokens.size(), 10u);
  }
  EXPECT_NE(outs[0].tokens, outs[1].tokens) << "different seeds, different samples";
  // The prompt was computed once: branches 1 and 2 share its 5 whole blocks and copy the sixth.
  for (size_t i = 1; i < outs.size(); ++i) {
    EXPECT_EQ(outs[i].stats.n_cached_tokens, 45);
    EXPECT_EQ(outs[i].stats.n_blocks_acquired, 5);
  }
  expect_no_leak(*engine);
}

TEST(EngineTest, ForkingAFinishedRequestContinuesItsCachedHistory) {
  std::unique_ptr<Engine> engine = make_engine(base_config());
  ASSERT_NE(engine, nullptr);
  EngineRequest first = greedy(Tokens(30, 321), 10);
  Result<RequestHandle> parent = engine->submit(first);
  ASSERT_TRUE(parent.ok());
  const RequestOutput& parent_out = parent->wait();
  EngineRequest params = greedy({}, 4);
  Result<std::vector<RequestHandle>> branches = engine->fork(*parent, 2, params);
  ASSERT_TRUE(branches.ok()) << branches.error().message;
  // The branches continue prompt + output; greedy, so both equal a plain request for that.
  Tokens history = first.prompt;
  history.insert(history.end(), parent_out.tokens.begin(), parent_out.tokens.end());
  const RequestOutput& a = (*branches)[0].wait();
  const RequestOutput& b = (*branches)[1].wait();
  EXPECT_EQ(a.stats.n_prompt_tokens, 40);
  EXPECT_EQ(a.stats.n_cached_tokens, 39);  // all of the history but the token it recomputes
  EXPECT_EQ(a.tokens, b.tokens);
  EngineConfig off = base_config();
  off.prefix_cache.enabled = false;
  std::unique_ptr<Engine> plain = make_engine(off);
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(a.tokens, plain->submit(greedy(history, 4))->wait().tokens);
  // Refused while the parent runs: the gate holds the loop inside the parent's first piece, so
  // it cannot have finished when fork is called.
  FirstPieceGate gate;
  Result<RequestHandle> unfinished = engine->submit(greedy(Tokens(10, 5), 100), gate.callback());
  ASSERT_TRUE(unfinished.ok());
  ASSERT_TRUE(gate.wait_reached());
  Result<std::vector<RequestHandle>> early = engine->fork(*unfinished, 2, params);
  EXPECT_FALSE(early.ok());
  if (!early.ok()) {
    EXPECT_NE(early.error().message.find("needs a finished request"), std::string::npos)
        << early.error().message;
  }
  unfinished->cancel();
  gate.release();
  EXPECT_EQ(unfinished->wait().finish_reason, FinishReason::CANCELLED);
  expect_no_leak(*engine);
}

TEST(EngineTest, CancellingReleasesTheBlocksAtOnce) {
  FirstPieceGate gate;
  std::unique_ptr<Engine> engine = make_engine(base_config());
  ASSERT_NE(engine, nullptr);
  EngineRequest request = greedy(Tokens(30, 77), 100);
  request.return_logits = false;
  // The whole run, for comparison (it ends at the context: 30 + 99 tokens > 128).
  const RequestOutput full = engine->submit(request)->wait();
  ASSERT_EQ(full.finish_reason, FinishReason::LENGTH);

  // Cancelled while the loop is held at the first piece: the loop checks cancellations before
  // every step, so not one token follows the cancel, whatever the machine's speed.
  Result<RequestHandle> h = engine->submit(request, gate.callback());
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE(gate.wait_reached());
  h->cancel();
  gate.release();
  const RequestOutput& out = h->wait();
  EXPECT_EQ(out.finish_reason, FinishReason::CANCELLED);
  EXPECT_EQ(gate.n_pieces(), 1);
  EXPECT_EQ(out.text, gate.text());
  ASSERT_LT(out.tokens.size(), full.tokens.size());
  EXPECT_EQ(out.tokens, Tokens(full.tokens.begin(), full.tokens.begin() + out.tokens.size()));
  EXPECT_EQ(full.text.substr(0, out.text.size()), out.text);
  EXPECT_EQ(out.stats.n_generated_tokens, static_cast<int32_t>(out.tokens.size()));
  expect_no_leak(*engine);
}

TEST(EngineTest, WarmCachesAPrefixForTheRequestsThatUseIt) {
  std::unique_ptr<Engine> engine = make_engine(base_config());
  ASSERT_NE(engine, nullptr);
  Tokens system(40);
  for (size_t i = 0; i < system.size(); ++i) system[i] = static_cast<TokenId>(500 + i);
  ASSERT_TRUE(engine->warm("", system).ok());
  EXPECT_FALSE(engine->warm("", Tokens{}).ok());
  for (int i = 0; i < 4; ++i) {
    Tokens p = i % 2 ? Tokens{9, 8, 7} : system;
    p.push_back(1000 + i);
    const RequestOutput out = engine->submit(greedy(p, 3))->wait();
    EXPECT_EQ(out.finish_reason, FinishReason::LENGTH) << out.error;
    EXPECT_EQ(out.stats.n_prompt_tokens, i % 2 ? 4 : 41);
    // Request 3 finds the 3 tokens that request 1 cached (the match leaves the last one out).
    EXPECT_EQ(out.stats.n_cached_tokens, i == 1 ? 0 : i == 3 ? 3 : 40) << "request " << i;
  }
  expect_no_leak(*engine);
}

// Where two logit rows differ ("" when bit-identical); gtest would print every element.
std::string logits_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size())
    return std::to_string(a.size()) + " vs " + std::to_string(b.size()) + " values";
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i])
      return "token " + std::to_string(i) + ": " + std::to_string(a[i]) + " vs " +
             std::to_string(b[i]);
  }
  return "";
}

// Prompt logits come from the same forward pass as sampling: position p's row equals the logits
// a request whose prompt ends at p samples from, whether the prompt is cached, chunked or not.
TEST(EngineTest, PromptLogitsOfEveryPositionMatchTheLogitsSampledFrom) {
  EngineConfig config = base_config();
  config.scheduler.max_batch_tokens = 8;  // the 21-token prompt runs in three chunks
  config.scheduler.max_seqs = 2;
  std::unique_ptr<Engine> engine = make_engine(config);
  ASSERT_NE(engine, nullptr);
  Tokens prompt(21);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<TokenId>(40 + 7 * i);
  ASSERT_TRUE(engine->warm("", prompt).ok());  // cached: the request must not use it

  EngineRequest all = greedy(prompt, 2);
  all.return_prompt_logits = true;
  all.return_logits = true;
  const RequestOutput out = engine->submit(all)->wait();
  ASSERT_EQ(out.finish_reason, FinishReason::LENGTH) << out.error;
  EXPECT_EQ(out.stats.n_cached_tokens, 0);
  ASSERT_EQ(out.prompt_logits.size(), prompt.size());
  ASSERT_EQ(out.logits.size(), 2u);
  EXPECT_EQ(logits_difference(out.prompt_logits.back(), out.logits.front()), "");
  for (size_t p : {size_t{0}, size_t{7}, size_t{8}, size_t{15}}) {
    EngineRequest prefix = greedy(Tokens(prompt.begin(), prompt.begin() + p + 1), 1);
    prefix.return_logits = true;
    const RequestOutput alone = engine->submit(prefix)->wait();
    ASSERT_EQ(alone.logits.size(), 1u);
    EXPECT_EQ(logits_difference(out.prompt_logits[p], alone.logits.front()), "")
        << "position " << p;
  }
  // Only the prompt's logits: nothing is generated.
  EngineRequest logits_only = greedy(prompt, 0);
  logits_only.return_prompt_logits = true;
  const RequestOutput only = engine->submit(logits_only)->wait();
  EXPECT_TRUE(only.tokens.empty());
  ASSERT_EQ(only.prompt_logits.size(), out.prompt_logits.size());
  for (size_t p = 0; p < out.prompt_logits.size(); ++p)
    EXPECT_EQ(logits_difference(only.prompt_logits[p], out.prompt_logits[p]), "")
        << "position " << p;
  EXPECT_FALSE(engine->fork(all, 2).ok()) << "branches have no prompt logits of their own";
  expect_no_leak(*engine);
}

TEST(EngineTest, LogprobsAreComputedAsTokensAreSampledWithoutKeepingLogits) {
  std::unique_ptr<Engine> engine = make_engine(base_config());
  ASSERT_NE(engine, nullptr);
  EngineRequest with_logits = greedy({1, 50, 60, 70}, 5);  // keeps every logits row
  const RequestOutput full = engine->run(with_logits).value();
  EngineRequest request = greedy({1, 50, 60, 70}, 5);
  request.return_logits = false;
  request.logprobs = 3;
  const RequestOutput out = engine->run(request).value();
  EXPECT_EQ(out.tokens, full.tokens);
  EXPECT_TRUE(out.logits.empty()) << "a logprobs request keeps no vocab-sized rows";
  ASSERT_EQ(out.logprobs.size(), out.tokens.size());
  for (size_t i = 0; i < out.tokens.size(); ++i) {
    const Logprobs want = compute_logprobs(full.logits[i], full.tokens[i], 3);
    EXPECT_EQ(out.logprobs[i].chosen, want.chosen) << i;
    EXPECT_EQ(out.logprobs[i].top, want.top) << i;
    ASSERT_EQ(out.logprobs[i].top.size(), 3u);
    EXPECT_EQ(out.logprobs[i].top.front().id, out.tokens[i]) << "greedy takes the most probable";
  }
  EngineRequest bad = greedy({1, 50}, 1);
  bad.logprobs = -2;
  EXPECT_FALSE(engine->run(bad).ok());
}

TEST(EngineTest, RequestsThatCanNeverRunFailAtOnce) {
  std::unique_ptr<Engine> engine = make_engine(base_config());
  ASSERT_NE(engine, nullptr);
  Result<RequestHandle> empty = engine->submit(greedy({}, 3));
  ASSERT_FALSE(empty.ok());
  Result<RequestOutput> ran = engine->run(greedy({}, 3));
  ASSERT_FALSE(ran.ok());
  EXPECT_EQ(ran.error().message, empty.error().message);
  EXPECT_NE(empty.error().message.find("empty"), std::string::npos);
  Result<RequestHandle> long_prompt = engine->submit(greedy(Tokens(kContext + 1, 5), 3));
  ASSERT_FALSE(long_prompt.ok());
  EXPECT_NE(long_prompt.error().message.find("more than the context of 128"), std::string::npos)
      << long_prompt.error().message;
  Result<RequestHandle> bad_token = engine->submit(greedy(Tokens{5, 99999}, 3));
  ASSERT_FALSE(bad_token.ok());
  EngineRequest bad_temp = greedy(Tokens{5}, 3);
  bad_temp.sampling.temperature = -1;
  EXPECT_FALSE(engine->submit(bad_temp).ok());
  EXPECT_FALSE(engine->fork(greedy(Tokens{5}, 3), 0).ok());
}

TEST(EngineTest, RequestStopTokensEndGenerationLikeEos) {
  std::unique_ptr<Engine> engine = make_engine(base_config());
  ASSERT_NE(engine, nullptr);
  EngineRequest request = greedy(Tokens{5, 17, 42}, 8);
  Result<RequestOutput> free_run = engine->run(request);
  ASSERT_TRUE(free_run.ok()) << free_run.error().message;
  ASSERT_EQ(free_run->tokens.size(), 8u);
  // Stop at the first occurrence of the third generated token (or at EOS, should it come first).
  const TokenId stop = free_run->tokens[2];
  const TokenId eos = engine->tokenizer().vocab().eos_id;
  const auto first = std::find_if(free_run->tokens.begin(), free_run->tokens.end(),
                                  [&](TokenId id) { return id == stop || id == eos; });
  const auto n_before_stop = static_cast<int32_t>(first - free_run->tokens.begin());
  request.stop_token_ids = {stop};
  request.ignore_eos = false;
  Result<RequestOutput> stopped = engine->run(request);
  ASSERT_TRUE(stopped.ok()) << stopped.error().message;
  EXPECT_EQ(stopped->finish_reason, FinishReason::STOP);
  // As with EOS, the stop token itself is not part of the output.
  EXPECT_EQ(stopped->tokens, Tokens(free_run->tokens.begin(), first));
  // Its text is that of the tokens before the stop token (whose own text is never emitted).
  Result<RequestOutput> before = engine->run(greedy(Tokens{5, 17, 42}, n_before_stop));
  ASSERT_TRUE(before.ok()) << before.error().message;
  EXPECT_EQ(stopped->text, before->text);
  // ignore_eos ignores them too.
  request.ignore_eos = true;
  Result<RequestOutput> ignored = engine->run(request);
  ASSERT_TRUE(ignored.ok()) << ignored.error().message;
  EXPECT_EQ(ignored->tokens, free_run->tokens);
  // An id outside the vocab is refused at once.
  request.stop_token_ids = {99999};
  EXPECT_FALSE(engine->submit(request).ok());
}

TEST(EngineTest, DestroyingTheEngineCancelsWhatRuns) {
  // A running request (known to run: the gate holds the loop at its first piece) and one queued
  // behind the held loop. Both may generate to the end of a long context, thousands of steps
  // that each attend to everything before them (about 2 s here), while the destructor needs only
  // to set its flag once the gate opens (microseconds): the requests end as cancelled on any
  // machine, and would end as "length" if destruction waited for them instead.
  constexpr int32_t kLongContext = 4096;
  const Tokens prompt(20, 9);
  const int32_t max_tokens = kLongContext - static_cast<int32_t>(prompt.size());
  FirstPieceGate gate;
  RequestHandle running, queued;
  bool queued_ok = false;
  {
    EngineConfig config = base_config();
    config.n_ctx = kLongContext;
    std::unique_ptr<Engine> engine = make_engine(config);
    ASSERT_NE(engine, nullptr);
    Result<RequestHandle> h = engine->submit(greedy(prompt, max_tokens), gate.callback());
    ASSERT_TRUE(h.ok());
    running = *h;
    ASSERT_TRUE(gate.wait_reached());
    Result<RequestHandle> q = engine->submit(greedy(Tokens(12, 10), max_tokens));
    EXPECT_TRUE(q.ok());  // not ASSERT: the gate must open before the engine goes
    queued_ok = q.ok();
    if (queued_ok) queued = *q;
    gate.release();
  }
  const RequestOutput& out = running.wait();
  EXPECT_EQ(out.finish_reason, FinishReason::CANCELLED);
  EXPECT_LT(out.tokens.size(), static_cast<size_t>(max_tokens));
  if (queued_ok) {
    EXPECT_EQ(queued.wait().finish_reason, FinishReason::CANCELLED);
  }
}

}  // namespace
}  // namespace trellis
