// A thousand random requests (fewer under the sanitizers: TRELLIS_TEST_SCALE) from several client
// threads (random lengths, shared prefixes, forks, cancellations at random moments) over a small
// pool: every request finishes or is cancelled, nothing deadlocks, and afterwards no block is held.
// Also run under ThreadSanitizer.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "model/model_presets.h"
#include "model/synth_model.h"
#include "test_support.h"

namespace trellis {
namespace {

using Tokens = std::vector<TokenId>;

TEST(EngineStressTest, RandomRequestsForksAndCancellationsAllEndWithoutLeaks) {
  const std::string path = testing::temp_dir() + "/stress-tiny.gguf";
  ASSERT_TRUE(
      synthesize_model(SynthOptions{*find_model_preset("tiny"), DType::Q8_0, 3, "", path, 2, false})
          .ok());
  EngineConfig config;
  config.n_threads = 2;
  config.block_size = 8;
  config.n_ctx = 96;
  config.kv_tokens = 96 + 3 * 8;  // room for about one and a half requests: constant pressure
  config.scheduler.max_batch_tokens = 32;
  config.scheduler.max_seqs = 5;
  config.scheduler.max_wait_steps = 8;
  Result<std::unique_ptr<Engine>> created = Engine::create(path, config);
  ASSERT_TRUE(created.ok()) << created.error().message;
  Engine& engine = **created;

  constexpr int kClients = 4;
  // 1000 requests in all, forks adding branches; 160 or more under a sanitizer's smaller scale,
  // still enough for forks, both kinds of cancellation, and preemption or eviction.
  const int kRequestsPerClient = testing::scaled_count(250, 40);
  std::atomic<int> n_finished{0}, n_cancelled{0}, n_forks{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      std::mt19937 rng(static_cast<uint32_t>(100 + c));
      auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
      for (int i = 0; i < kRequestsPerClient; ++i) {
        EngineRequest request;
        const int shared = pick(0, 40);
        for (int k = 0; k < shared; ++k) request.prompt.push_back(200 + k);  // common prefix
        for (int k = pick(1, 40); k > 0; --k) request.prompt.push_back(pick(3, 2000));
        request.max_tokens = pick(1, 12);
        request.sampling.temperature = pick(0, 1) ? 0.0f : 0.8f;
        request.sampling.seed = static_cast<uint64_t>(i);
        request.ignore_eos = pick(0, 1) == 1;
        request.cache_namespace = pick(0, 3) == 0 ? "other" : "";
        std::vector<RequestHandle> handles;
        if (pick(0, 5) == 0) {
          Result<std::vector<RequestHandle>> forked = engine.fork(request, pick(2, 3));
          ASSERT_TRUE(forked.ok()) << forked.error().message;
          handles = *forked;
          ++n_forks;
        } else {
          Result<RequestHandle> h = engine.submit(request);
          ASSERT_TRUE(h.ok()) << h.error().message;
          handles.push_back(*h);
        }
        const int cancel_mode = pick(0, 4);  // 0: at once, 1: after some text, else: never
        for (RequestHandle& h : handles) {
          if (cancel_mode == 0) h.cancel();
          std::string text;
          if (cancel_mode == 1 && h.next_text(text)) h.cancel();
          const RequestOutput& out = h.wait();
          if (out.finish_reason == FinishReason::CANCELLED) {
            ++n_cancelled;
          } else if (out.finish_reason == FinishReason::LENGTH) {
            // Prompts (at most 80 tokens) plus max_tokens (at most 12) fit the context of 96, so
            // "length" means max_tokens reached, exactly.
            EXPECT_EQ(static_cast<int32_t>(out.tokens.size()), request.max_tokens);
            ++n_finished;
          } else {
            // Otherwise only EOS can end it (no stop strings), which ignore_eos rules out.
            EXPECT_EQ(out.finish_reason, FinishReason::STOP) << out.error;
            EXPECT_FALSE(request.ignore_eos);
            EXPECT_LT(static_cast<int32_t>(out.tokens.size()), request.max_tokens);
            ++n_finished;
          }
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_GT(n_finished.load(), 0);
  EXPECT_GT(n_cancelled.load(), 0);
  EXPECT_GT(n_forks.load(), 0);
  Status ok = engine.check_invariants();
  EXPECT_TRUE(ok.ok()) << (ok.ok() ? "" : ok.error().message);
  const EngineStats stats = engine.stats();
  EXPECT_EQ(stats.n_blocks_in_use, 0);
  EXPECT_EQ(stats.n_running, 0);
  EXPECT_EQ(stats.n_waiting, 0);
  EXPECT_GT(stats.n_preemptions + stats.n_blocks_evicted, 0);
  engine.flush_cache();
  EXPECT_EQ(engine.stats().n_blocks_free, engine.stats().n_blocks_total);
}

}  // namespace
}  // namespace trellis
