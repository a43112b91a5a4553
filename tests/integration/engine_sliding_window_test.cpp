// Sliding-window layers that keep their window only (window pages, kv/window_pages.h), through
// the engine on a tiny gemma3 (window 32 on layers 0 and 2 of 4, blocks of 16): the logits are
// bit for bit those of --swa-full (every layer keeps the whole context); the prefix cache on ==
// off and batched == alone hold with them; a pool small enough that pages are evicted changes
// nothing either; the memory a long request holds shrinks to the full layers plus a window; and
// nothing leaks.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "test_support.h"

namespace trellis {
namespace {

using Tokens = std::vector<TokenId>;

EngineConfig config_for(bool swa_full) {
  EngineConfig config;
  config.n_threads = 2;
  config.block_size = 16;
  config.n_ctx = 512;
  config.swa_full = swa_full;
  config.scheduler.max_batch_tokens = 64;  // prompts go in several chunks
  return config;
}

std::unique_ptr<Engine> make_engine(const EngineConfig& config) {
  Result<std::unique_ptr<Engine>> engine =
      Engine::create(testing::tiny_gemma3_engine_model(), config);
  EXPECT_TRUE(engine.ok()) << engine.error().message;
  return engine.ok() ? std::move(engine).value() : nullptr;
}

Tokens random_tokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  Tokens t;
  for (int i = 0; i < n; ++i) t.push_back(std::uniform_int_distribution<int>(3, 2000)(rng));
  return t;
}

struct Outcome {
  Tokens tokens;
  std::vector<std::vector<float>> logits;
  int32_t n_cached = 0;
};

// Submits every prompt at once (they run batched), greedy, with logits.
std::vector<Outcome> run_all(Engine& engine, const std::vector<Tokens>& prompts,
                             int32_t max_tokens) {
  std::vector<RequestHandle> handles;
  for (const Tokens& p : prompts) {
    Result<RequestHandle> h = engine.submit(testing::greedy_request(p, max_tokens, true));
    EXPECT_TRUE(h.ok()) << h.error().message;
    if (h.ok()) handles.push_back(std::move(h).value());
  }
  std::vector<Outcome> runs;
  for (RequestHandle& h : handles) {
    const RequestOutput& out = h.wait();
    EXPECT_TRUE(out.error.empty()) << out.error;
    runs.push_back({out.tokens, out.logits, out.stats.n_cached_tokens});
  }
  return runs;
}

void expect_same(const std::vector<Outcome>& got, const std::vector<Outcome>& want,
                 const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << what << ", request " << i;
    EXPECT_TRUE(got[i].logits == want[i].logits) << what << ", request " << i << ": logits differ";
  }
}

TEST(EngineSlidingWindow, TheModelHasWindowedLayersKeptInPages) {
  std::unique_ptr<Engine> windowed = make_engine(config_for(false));
  std::unique_ptr<Engine> full = make_engine(config_for(true));
  ASSERT_NE(windowed, nullptr);
  ASSERT_NE(full, nullptr);
  EXPECT_GT(windowed->stats().n_window_pages_total, 0);
  EXPECT_EQ(full->stats().n_window_pages_total, 0);
  // Two of four layers in pages: a block holds half of what it holds with --swa-full.
  EXPECT_EQ(windowed->stats().block_bytes * 2, full->stats().block_bytes);
  EXPECT_EQ(windowed->stats().page_bytes, windowed->stats().block_bytes);
}

TEST(EngineSlidingWindow, OutputsAndLogitsAreThoseOfTheFullCache) {
  const std::vector<Tokens> prompts = {random_tokens(200, 1), random_tokens(37, 2),
                                       random_tokens(130, 3)};
  std::unique_ptr<Engine> full = make_engine(config_for(true));
  ASSERT_NE(full, nullptr);
  const std::vector<Outcome> want = run_all(*full, prompts, 40);
  std::unique_ptr<Engine> windowed = make_engine(config_for(false));
  ASSERT_NE(windowed, nullptr);
  expect_same(run_all(*windowed, prompts, 40), want, "windows, batched");
  // Alone, one after another: the same again.
  for (size_t i = 0; i < prompts.size(); ++i)
    expect_same(run_all(*windowed, {prompts[i]}, 40), {want[i]}, "windows, alone");
  testing::expect_no_leak(*windowed);
}

TEST(EngineSlidingWindow, ACachedConversationIsReusedAndExact) {
  // A chat: each turn's prompt is the last turn's prompt, its reply and a new message.
  std::unique_ptr<Engine> on = make_engine(config_for(false));
  EngineConfig off_config = config_for(false);
  off_config.prefix_cache.enabled = false;
  std::unique_ptr<Engine> off = make_engine(off_config);
  ASSERT_NE(on, nullptr);
  ASSERT_NE(off, nullptr);
  Tokens prompt = random_tokens(90, 7);
  for (int turn = 0; turn < 4; ++turn) {
    const std::vector<Outcome> a = run_all(*on, {prompt}, 24);
    const std::vector<Outcome> b = run_all(*off, {prompt}, 24);
    ASSERT_EQ(a.size(), 1u);
    expect_same(a, b, "cache on vs off");
    if (turn > 0) {
      EXPECT_GT(a[0].n_cached, 90) << "turn " << turn << ": the window was not kept";
    }
    prompt.insert(prompt.end(), a[0].tokens.begin(), a[0].tokens.end());
    const Tokens message = random_tokens(20, 100 + static_cast<uint32_t>(turn));
    prompt.insert(prompt.end(), message.begin(), message.end());
  }
  testing::expect_no_leak(*on);
}

TEST(EngineSlidingWindow, EvictingPagesUnderPressureChangesNothing) {
  // Many different prompts on a pool whose pages cannot keep every cached window.
  std::vector<Tokens> prompts;
  for (uint32_t i = 0; i < 8; ++i) prompts.push_back(random_tokens(120, 50 + i));
  std::unique_ptr<Engine> full = make_engine(config_for(true));
  ASSERT_NE(full, nullptr);
  const std::vector<Outcome> want = run_all(*full, prompts, 16);
  EngineConfig small = config_for(false);
  small.scheduler.max_seqs = 2;
  small.kv_bytes = 768 << 10;  // 16 pages and 32 blocks of 16 KiB
  std::unique_ptr<Engine> windowed = make_engine(small);
  ASSERT_NE(windowed, nullptr);
  expect_same(run_all(*windowed, prompts, 16), want, "small pool");
  // Again: some prefixes hit, some lost their windows.
  expect_same(run_all(*windowed, prompts, 16), want, "small pool, second round");
  EXPECT_GT(windowed->stats().n_window_pages_evicted, 0);
  testing::expect_no_leak(*windowed);
}

TEST(EngineSlidingWindow, ALongRequestHoldsTheFullLayersAndOneWindow) {
  const Tokens prompt = random_tokens(400, 9);
  EngineConfig config = config_for(false);
  config.prefix_cache.enabled = false;
  std::unique_ptr<Engine> windowed = make_engine(config);
  config.swa_full = true;
  std::unique_ptr<Engine> full = make_engine(config);
  ASSERT_NE(windowed, nullptr);
  ASSERT_NE(full, nullptr);
  run_all(*windowed, {prompt}, 8);
  run_all(*full, {prompt}, 8);
  const EngineStats w = windowed->stats();
  const EngineStats f = full->stats();
  const size_t windowed_peak = static_cast<size_t>(w.peak_blocks_in_use) * w.block_bytes +
                               static_cast<size_t>(w.peak_window_pages_held) * w.page_bytes;
  const size_t full_peak = static_cast<size_t>(f.peak_blocks_in_use) * f.block_bytes;
  // Full: 26 blocks of 4 layers. Windowed: 26 blocks of 2 layers, and pages for the window (32)
  // plus a chunk (64): at most 8 of 2 layers.
  EXPECT_LE(w.peak_window_pages_held, 8);
  EXPECT_LT(windowed_peak * 10, full_peak * 7) << windowed_peak << " vs " << full_peak;
  testing::expect_no_leak(*windowed);
}

}  // namespace
}  // namespace trellis
