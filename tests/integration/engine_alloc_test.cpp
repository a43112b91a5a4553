// The engine's step loop allocates nothing in steady state: once requests are admitted, their
// decode steps and the prefill chunks of a long prompt run without a single heap allocation, in
// the loop thread or the thread pool's workers, whether the text is pushed to a callback or pulled
// with next_text.
//
// With the prefix cache on, each prefill chunk caches its whole blocks in the radix tree as a new
// node, a heap object: those few allocations per chunk are the cache's work (they follow the
// chunks cached, not the steps or the requests decoding), and decode steps still allocate nothing.
//
// This binary links the counting operator new (base/alloc_hook.h). The test's own thread is not
// counted: it only submits requests and pulls text (next_text copies the text into
// the caller's string, an allocation that is the caller's by design).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "base/alloc_hook.h"
#include "engine/engine.h"
#include "model/model_presets.h"
#include "model/synth_model.h"
#include "test_support.h"

namespace trellis {
namespace {

using Tokens = std::vector<TokenId>;

const std::string& tiny_model_path() {
  static const std::string path = [] {
    std::string p = testing::temp_dir() + "/alloc-tiny.gguf";
    SynthOptions options{*find_model_preset("tiny"), DType::Q8_0, 5, "", p, 2, false};
    Status status = synthesize_model(options);
    EXPECT_TRUE(status.ok()) << status.error().message;
    return p;
  }();
  return path;
}

Tokens counting_tokens(TokenId first, int32_t n) {
  Tokens t;
  for (int32_t i = 0; i < n; ++i) t.push_back(first + (i * 7) % 300);
  return t;
}

EngineRequest greedy(Tokens prompt, int32_t max_tokens) {
  return testing::greedy_request(std::move(prompt), max_tokens);
}

// A stretch of n_pieces pieces of the probe request's text, from the first piece at which `ready`
// holds: the allocation count and the step number read at both ends on the loop thread (inside
// the callback, between two steps).
struct Window {
  int n_pieces = 0;
  std::function<bool()> ready;
  int start_piece = -1;
  std::atomic<int64_t> allocations_at_start{-1};
  std::atomic<int64_t> allocations_at_end{-1};
  std::atomic<int64_t> step_at_start{-1};
  std::atomic<int64_t> step_at_end{-1};

  void mark(int piece, const Engine& engine) {
    if (start_piece < 0 && ready()) {
      start_piece = piece;
      allocations_at_start = heap_allocations();
      step_at_start = engine.stats().n_steps;
    } else if (start_piece >= 0 && piece == start_piece + n_pieces) {
      allocations_at_end = heap_allocations();
      step_at_end = engine.stats().n_steps;
    }
  }
  bool done() const { return step_at_end >= 0; }
  int64_t allocations() const { return allocations_at_end - allocations_at_start; }
  int64_t steps() const { return step_at_end - step_at_start; }
};

class EngineAllocTest : public ::testing::TestWithParam<bool> {};

TEST_P(EngineAllocTest, SteadyStateStepsDoNotAllocate) {
  count_this_thread(false);
  const bool cache_on = GetParam();
  EngineConfig config;
  config.n_threads = 2;  // the pool's worker runs kernels too: its allocations count
  config.block_size = 8;
  config.n_ctx = 512;  // room for the long prompt and all its tokens: nothing ends early
  config.prefix_cache.enabled = cache_on;
  config.scheduler.max_seqs = 8;
  // Three decoders take 3 tokens of each step: the long prompt goes in chunks of 13.
  config.scheduler.max_batch_tokens = 16;
  // Draft lengths by acceptance only: weighed by measured step times, a loaded machine changes
  // when drafts start and stop, and with them when a draft buffer first grows (the prefill
  // window's count sits at its bound, 5 per chunk).
  config.speculation.length.weigh_step_cost = false;
  Result<std::unique_ptr<Engine>> created = Engine::create(tiny_model_path(), config);
  ASSERT_TRUE(created.ok()) << created.error().message;
  Engine& engine = **created;

  // While the long prompt is prefilled (in chunks, beside the decoders), from the step after the
  // last admission (requests arrive while the loop already runs); then once every request
  // decodes. Every request outlives both windows.
  std::atomic<int64_t> long_prompt_first_step{-1};  // the step that finished its prefill
  Window prefill;
  prefill.n_pieces = 40;
  prefill.ready = [&] { return engine.stats().n_running == 4; };
  Window decode;
  decode.n_pieces = 40;
  decode.ready = [&] { return prefill.done() && long_prompt_first_step.load() >= 0; };
  std::atomic<int> n_probe_pieces{0};
  auto probe = [&](std::string_view) {
    const int piece = ++n_probe_pieces;
    prefill.mark(piece, engine);
    decode.mark(piece, engine);
  };
  auto mark_prefilled = [&](std::string_view) {
    if (long_prompt_first_step.load() < 0) long_prompt_first_step = engine.stats().n_steps;
  };
  std::atomic<int> n_ignored{0};
  auto ignore = [&](std::string_view) { ++n_ignored; };

  std::vector<RequestHandle> handles;
  auto submit = [&](EngineRequest request, std::function<void(std::string_view)> on_text) {
    Result<RequestHandle> h = engine.submit(std::move(request), std::move(on_text));
    ASSERT_TRUE(h.ok()) << h.error().message;
    handles.push_back(*h);
  };
  submit(greedy(counting_tokens(10, 5), 150), probe);
  submit(greedy(counting_tokens(20, 5), 150), ignore);
  submit(greedy(counting_tokens(30, 5), 150), {});  // pulled below
  submit(greedy(counting_tokens(40, 200), 140), mark_prefilled);

  std::string text;  // reused: after the first few pulls it has room
  int64_t n_pulled_bytes = 0;
  while (handles[2].next_text(text)) n_pulled_bytes += static_cast<int64_t>(text.size());
  for (RequestHandle& h : handles) {
    EXPECT_EQ(h.wait().finish_reason, FinishReason::LENGTH) << h.wait().error;
  }
  EXPECT_EQ(n_pulled_bytes, static_cast<int64_t>(handles[2].wait().text.size()));

  ASSERT_TRUE(prefill.done() && decode.done());
  // The first window covers most of the long prompt's prefill chunks (13 tokens each), the second
  // only decode steps (fewer than pieces where speculation kept drafts: the prompts repeat).
  EXPECT_GE(prefill.steps(), 10);
  const int64_t n_chunks = long_prompt_first_step - prefill.step_at_start;
  EXPECT_GE(n_chunks, 10);
  EXPECT_LT(long_prompt_first_step, prefill.step_at_end);
  EXPECT_GE(decode.steps(), 10);
  EXPECT_EQ(decode.allocations(), 0) << "heap allocations in " << decode.steps() << " steps";
  if (cache_on) {
    // Only the tree node each chunk adds for the blocks it caches: the node, its tokens and
    // blocks, its entry in its parent's children (and that map's buckets for a first child).
    EXPECT_LE(prefill.allocations(), 5 * n_chunks) << "in " << prefill.steps() << " steps";
  } else {
    EXPECT_EQ(prefill.allocations(), 0) << "heap allocations in " << prefill.steps() << " steps";
  }
  std::printf(
      "cache %s: %lld allocations in %lld steps (%lld prefill chunks), %lld in %lld "
      "decode steps\n",
      cache_on ? "on" : "off", static_cast<long long>(prefill.allocations()),
      static_cast<long long>(prefill.steps()), static_cast<long long>(n_chunks),
      static_cast<long long>(decode.allocations()), static_cast<long long>(decode.steps()));
}

// The zero counts above mean something only if the hook counts: a direct call of the global
// operator new (never elided, unlike a new-expression) on a counted thread must show.
TEST(AllocHook, CountsTheAllocationsOfCountedThreadsOnly) {
  int64_t counted = 0, uncounted = 0;
  std::thread([&] {
    const int64_t before = heap_allocations();
    ::operator delete(::operator new(64));
    counted = heap_allocations() - before;
    count_this_thread(false);
    const int64_t after = heap_allocations();
    ::operator delete(::operator new(64));
    uncounted = heap_allocations() - after;
  }).join();
  EXPECT_GE(counted, 1);
  EXPECT_EQ(uncounted, 0);
}

INSTANTIATE_TEST_SUITE_P(CacheOffAndOn, EngineAllocTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "CacheOn" : "CacheOff");
                         });

}  // namespace
}  // namespace trellis
