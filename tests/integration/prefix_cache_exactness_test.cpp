// The prefix cache never changes outputs: the same random prompts (shared prefixes of random
// lengths, block-boundary edge cases, repeats, follow-up turns that extend an earlier prompt and
// its output) give token-for-token identical greedy outputs and bit-identical logits with the
// cache off, on in BLOCK mode, on in TOKEN mode, and in TOKEN mode on a pool so small that almost
// every request evicts; for f16 KV and for the quantized KV types. Afterwards no block is held by a
// request and a flush frees them all. The requests run through the engine, one after another, as a
// chat's turns would.
#include <gtest/gtest.h>

#include <functional>
#include <future>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/model_presets.h"
#include "model/synth_model.h"
#include "test_support.h"

namespace trellis {
namespace {

using Tokens = std::vector<TokenId>;
constexpr int32_t kContext = 192;
constexpr int32_t kMaxTokens = 10;

const std::string& tiny_model_path() {
  static const std::string path = [] {
    std::string p = testing::temp_dir() + "/prefix-exactness.gguf";
    SynthOptions options{*find_model_preset("tiny"), DType::Q8_0, 5, "", p, 2, false};
    Status status = synthesize_model(options);
    EXPECT_TRUE(status.ok()) << status.error().message;
    return p;
  }();
  return path;
}

struct Variant {
  std::string name;
  bool cache = true;
  MatchMode mode = MatchMode::TOKEN;
  int64_t kv_tokens = 0;  // 0: the default pool
};

struct Outcome {
  Tokens tokens;
  std::vector<std::vector<float>> logits;
  int32_t n_cached_tokens = 0;
};

// Random prompts over a few prefix groups. Lengths cluster around block boundaries; some prompts
// repeat earlier ones, some extend an earlier prompt plus its output (a chat's next turn), which
// is why the prompt list is built while running.
class PromptMaker {
 public:
  PromptMaker(uint32_t seed, int32_t block_size) : rng_(seed), block_size_(block_size) {
    for (int g = 0; g < 3; ++g) groups_.push_back(random_tokens(120));
  }

  Tokens next(const std::vector<Tokens>& earlier_turns) {
    const int kind = pick(0, 9);
    if (kind == 0 && !earlier_turns.empty())  // an exact repeat
      return earlier_turns[static_cast<size_t>(
          pick(0, static_cast<int>(earlier_turns.size()) - 1))];
    if (kind <= 2 && !earlier_turns.empty()) {  // a follow-up turn
      Tokens t =
          earlier_turns[static_cast<size_t>(pick(0, static_cast<int>(earlier_turns.size()) - 1))];
      Tokens more = random_tokens(pick(1, 9));
      t.insert(t.end(), more.begin(), more.end());
      if (static_cast<int32_t>(t.size()) + kMaxTokens <= kContext) return t;
    }
    const Tokens& group =
        groups_[static_cast<size_t>(pick(0, static_cast<int>(groups_.size()) - 1))];
    // Shared part: a block boundary, one off either side of it, or anywhere.
    const int32_t boundary = block_size_ * pick(0, 5);
    const int32_t shared =
        std::clamp(kind % 2 == 0 ? boundary + pick(-1, 1) : pick(0, 100), 0, 100);
    Tokens t(group.begin(), group.begin() + shared);
    Tokens suffix = random_tokens(pick(shared == 0 ? 1 : 0, 40));
    t.insert(t.end(), suffix.begin(), suffix.end());
    if (t.empty()) t.push_back(1);
    return t;
  }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  Tokens random_tokens(int n) {
    Tokens t(static_cast<size_t>(n));
    for (TokenId& id : t) id = pick(3, 2000);
    return t;
  }

  std::mt19937 rng_;
  int32_t block_size_;
  std::vector<Tokens> groups_;
};

struct RunStats {
  std::vector<Outcome> outcomes;
  int64_t n_evicted = 0;
};

// Runs `request` to its end.
RequestOutput run(Engine& engine, EngineRequest request) {
  Result<RequestOutput> out = engine.run(std::move(request));
  EXPECT_TRUE(out.ok()) << out.error().message;
  return out.ok() ? std::move(out).value() : RequestOutput{};
}

RunStats run_variant(const Variant& v, int32_t block_size, KvTypes kv_types, uint32_t seed,
                     int n_prompts) {
  EngineConfig config;
  config.n_threads = 2;
  config.block_size = block_size;
  config.kv_types = kv_types;
  config.n_ctx = kContext;
  config.scheduler.max_batch_tokens = 24;  // several prefill chunks per prompt
  config.prefix_cache = PrefixCacheConfig{v.cache, v.mode};
  config.kv_tokens = v.kv_tokens;
  Result<std::unique_ptr<Engine>> created = Engine::create(tiny_model_path(), config);
  EXPECT_TRUE(created.ok()) << created.error().message;
  if (!created.ok()) return {};
  Engine& engine = **created;
  EXPECT_EQ(engine.n_ctx(), kContext) << v.name;

  PromptMaker maker(seed, block_size);
  std::vector<Tokens> turns;  // prompt + output of every request so far
  RunStats stats;
  for (int i = 0; i < n_prompts; ++i) {
    EngineRequest request;
    request.prompt = maker.next(turns);
    request.max_tokens = kMaxTokens;
    request.sampling.temperature = 0;
    request.ignore_eos = true;
    request.return_logits = true;
    Tokens turn = request.prompt;
    const RequestOutput result = run(engine, std::move(request));
    EXPECT_EQ(result.finish_reason, FinishReason::LENGTH) << v.name << ": " << result.error;
    if (result.finish_reason != FinishReason::LENGTH) return stats;
    // check_invariants() runs on the engine's thread and refreshes the figures read after it.
    Status ok = engine.check_invariants();
    EXPECT_TRUE(ok.ok()) << v.name << ": " << (ok.ok() ? "" : ok.error().message);
    EXPECT_EQ(engine.stats().n_blocks_in_use, 0) << v.name << " request " << i;
    turn.insert(turn.end(), result.tokens.begin(), result.tokens.end());
    turns.push_back(std::move(turn));
    stats.outcomes.push_back({result.tokens, result.logits, result.stats.n_cached_tokens});
  }
  stats.n_evicted = engine.stats().n_blocks_evicted;
  engine.flush_cache();
  const EngineStats after = engine.stats();
  EXPECT_EQ(after.n_blocks_free, after.n_blocks_total) << v.name << ": a block leaked";
  return stats;
}

struct ExactnessCase {
  int32_t block_size;
  KvType kv_type;
};

class PrefixCacheExactnessTest : public ::testing::TestWithParam<ExactnessCase> {};

TEST_P(PrefixCacheExactnessTest, CacheModesAndEvictionNeverChangeOutputs) {
  const int32_t B = GetParam().block_size;
  const KvTypes kv_types = KvTypes::both(GetParam().kv_type);
  const int kPrompts = 40;
  const uint32_t seed = 1234u + static_cast<uint32_t>(B);
  // The tiny pool holds one context plus one block: nearly every request evicts.
  const std::vector<Variant> variants = {
      {"off", false, MatchMode::TOKEN, 0},
      {"block", true, MatchMode::BLOCK, 0},
      {"token", true, MatchMode::TOKEN, 0},
      {"token-tiny-pool", true, MatchMode::TOKEN, kContext + B},
  };
  std::vector<RunStats> runs;
  for (const Variant& v : variants) runs.push_back(run_variant(v, B, kv_types, seed, kPrompts));
  for (const RunStats& r : runs) ASSERT_EQ(r.outcomes.size(), static_cast<size_t>(kPrompts));

  const RunStats& off = runs[0];
  for (size_t k = 1; k < runs.size(); ++k) {
    for (int i = 0; i < kPrompts; ++i) {
      const Outcome& want = off.outcomes[static_cast<size_t>(i)];
      const Outcome& got = runs[k].outcomes[static_cast<size_t>(i)];
      ASSERT_EQ(got.tokens, want.tokens) << variants[k].name << " prompt " << i;
      ASSERT_EQ(got.logits.size(), want.logits.size());
      for (size_t s = 0; s < want.logits.size(); ++s) {
        // Bit-identical, not merely close.
        ASSERT_EQ(got.logits[s], want.logits[s])
            << variants[k].name << " prompt " << i << " step " << s;
      }
    }
  }
  // The variants did what they claim: no sharing when off, whole blocks in BLOCK mode, more
  // reuse in TOKEN mode, constant eviction in the tiny pool.
  int64_t cached[4] = {0, 0, 0, 0};
  for (size_t k = 0; k < runs.size(); ++k) {
    for (const Outcome& o : runs[k].outcomes) cached[k] += o.n_cached_tokens;
  }
  EXPECT_EQ(cached[0], 0);
  for (const Outcome& o : runs[1].outcomes) EXPECT_EQ(o.n_cached_tokens % B, 0);
  EXPECT_GT(cached[1], 0);
  EXPECT_GT(cached[2], cached[1]);
  EXPECT_GT(cached[3], 0);
  EXPECT_GT(runs[3].n_evicted, runs[2].n_evicted);
  EXPECT_GT(runs[3].n_evicted, kPrompts);
}

INSTANTIATE_TEST_SUITE_P(
    BlockSizesAndKvTypes, PrefixCacheExactnessTest,
    ::testing::Values(ExactnessCase{8, KvType::F16}, ExactnessCase{16, KvType::F16},
                      ExactnessCase{16, KvType::Q8_0}, ExactnessCase{8, KvType::Q4_0}),
    [](const ::testing::TestParamInfo<ExactnessCase>& info) {
      return "B" + std::to_string(info.param.block_size) + "_" + kv_type_name(info.param.kv_type);
    });

TEST(PrefixCacheLifecycle, CancellingReleasesEveryBlockAndKeepsTheCacheValid) {
  EngineConfig config;
  config.n_threads = 2;
  config.block_size = 8;
  config.n_ctx = kContext;
  Result<std::unique_ptr<Engine>> created = Engine::create(tiny_model_path(), config);
  ASSERT_TRUE(created.ok()) << created.error().message;
  Engine& engine = **created;

  EngineRequest request;
  for (TokenId t = 10; t < 60; ++t) request.prompt.push_back(t);
  request.max_tokens = 30;
  request.sampling.temperature = 0;
  request.ignore_eos = true;
  // Cancelled from its own text callback, on the engine's thread: the engine stops it before the
  // next step, whatever the machine's speed.
  std::promise<RequestHandle> own_handle;
  std::shared_future<RequestHandle> self = own_handle.get_future().share();
  int pieces = 0;
  Result<RequestHandle> handle = engine.submit(request, [&pieces, self](std::string_view) {
    if (++pieces == 3) RequestHandle(self.get()).cancel();
  });
  ASSERT_TRUE(handle.ok()) << handle.error().message;
  own_handle.set_value(*handle);
  const RequestOutput cancelled = handle->wait();
  EXPECT_EQ(cancelled.finish_reason, FinishReason::CANCELLED);
  // Three pieces of text need at least three tokens; the cancel lands before the next step.
  EXPECT_GE(cancelled.tokens.size(), 3u);
  EXPECT_LT(cancelled.tokens.size(), 30u);
  ASSERT_TRUE(engine.check_invariants().ok());
  EXPECT_EQ(engine.stats().n_blocks_in_use, 0);

  // The cancelled request's cached KV is reused and gives the same output as a fresh run.
  const RequestOutput again = run(engine, request);
  EXPECT_EQ(again.stats.n_cached_tokens, 49);
  config.prefix_cache.enabled = false;
  Result<std::unique_ptr<Engine>> fresh = Engine::create(tiny_model_path(), config);
  ASSERT_TRUE(fresh.ok());
  const RequestOutput baseline = run(**fresh, request);
  ASSERT_EQ(baseline.finish_reason, FinishReason::LENGTH) << baseline.error;
  EXPECT_EQ(again.tokens, baseline.tokens);
  EXPECT_TRUE(std::equal(cancelled.tokens.begin(), cancelled.tokens.end(), baseline.tokens.begin()))
      << "the cancelled request generated what the full one did, up to the cancel";
  ASSERT_TRUE(engine.check_invariants().ok());
  EXPECT_EQ(engine.stats().n_blocks_in_use, 0);
  engine.flush_cache();
  EXPECT_EQ(engine.stats().n_blocks_free, engine.stats().n_blocks_total);
}

TEST(PrefixCacheLifecycle, APoolSmallerThanTheContextShortensTheContext) {
  EngineConfig config;
  config.n_threads = 1;
  config.block_size = 16;
  config.n_ctx = 256;
  config.kv_tokens = 100;  // 7 blocks: one request of up to 6 blocks always fits
  Result<std::unique_ptr<Engine>> created = Engine::create(tiny_model_path(), config);
  ASSERT_TRUE(created.ok()) << created.error().message;
  EXPECT_EQ((*created)->n_ctx(), 96);
  EXPECT_EQ((*created)->stats().n_blocks_total, 7);

  config.kv_tokens = 16;  // one block: too small for anything
  Result<std::unique_ptr<Engine>> tiny = Engine::create(tiny_model_path(), config);
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.error().message.find("too small"), std::string::npos) << tiny.error().message;
}

}  // namespace
}  // namespace trellis
