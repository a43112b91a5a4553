// The engine with a disk tier under its prefix cache, on the tiny synthetic model: greedy outputs
// and their logits equal those of runs without any cache, bit for bit, after evictions to disk,
// loads back, restarts, corrupt tier files and a writer killed at random moments; namespaces stay
// apart across restarts; a tier of another block size is ignored; a directory serves one engine
// at a time; and no block is left behind in the pool.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "test_support.h"

namespace trellis {
namespace {
namespace fs = std::filesystem;

using Tokens = std::vector<TokenId>;
constexpr int32_t kContext = 128;
constexpr int32_t kBlock = 8;
constexpr int32_t kMaxTokens = 6;

const std::string& tiny_model_path() {
  return testing::tiny_engine_model();
}

std::string fresh_dir(const std::string& name) {
  const std::string dir = testing::temp_dir() + "/" + name;
  fs::remove_all(dir);
  return dir;
}

// A pool of one context plus two blocks: running the prompts one after another evicts.
EngineConfig disk_config(const std::string& dir, std::vector<std::string>* log = nullptr) {
  EngineConfig config;
  config.n_threads = 2;
  config.block_size = kBlock;
  config.n_ctx = kContext;
  config.kv_tokens = kContext + 2 * kBlock;
  config.cache_dir = dir;
  config.cache_disk_bytes = int64_t{64} << 20;
  config.disk_log = [log](const std::string& line) {
    if (log != nullptr) log->push_back(line);
  };
  return config;
}

std::unique_ptr<Engine> make_engine(const EngineConfig& config,
                                    const std::string& model = tiny_model_path()) {
  Result<std::unique_ptr<Engine>> engine = Engine::create(model, config);
  EXPECT_TRUE(engine.ok()) << engine.error().message;
  return engine.ok() ? std::move(engine).value() : nullptr;
}

EngineRequest greedy(Tokens prompt, std::string ns = "") {
  EngineRequest r = testing::greedy_request(std::move(prompt), kMaxTokens, /*return_logits=*/true);
  r.cache_namespace = std::move(ns);
  return r;
}

// Prompts over two shared prefixes of 60 tokens, diverging at and around block boundaries.
std::vector<Tokens> prompts(uint32_t seed, int n) {
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<Tokens> prefixes(2);
  for (Tokens& p : prefixes) {
    for (int i = 0; i < 60; ++i) p.push_back(pick(3, 2000));
  }
  std::vector<Tokens> out;
  for (int i = 0; i < n; ++i) {
    const Tokens& prefix = prefixes[static_cast<size_t>(pick(0, 1))];
    const int shared = std::min(60, kBlock * pick(1, 7) + pick(-1, 1));
    Tokens t(prefix.begin(), prefix.begin() + shared);
    for (int k = pick(1, 20); k > 0; --k) t.push_back(pick(3, 2000));
    out.push_back(std::move(t));
  }
  return out;
}

// Outputs without any cache, one request at a time: what every other run must reproduce.
const std::vector<RequestOutput>& reference(const std::vector<Tokens>& ps,
                                            const std::string& model = tiny_model_path()) {
  static std::map<std::pair<std::string, std::vector<Tokens>>, std::vector<RequestOutput>> memo;
  const auto key = std::make_pair(model, ps);
  auto it = memo.find(key);
  if (it != memo.end()) return it->second;
  EngineConfig config;
  config.n_threads = 2;
  config.block_size = kBlock;
  config.n_ctx = kContext;
  config.prefix_cache.enabled = false;
  std::unique_ptr<Engine> engine = make_engine(config, model);
  std::vector<RequestOutput> want;
  for (const Tokens& p : ps) want.push_back(*engine->run(greedy(p)));
  return memo[key] = std::move(want);
}

void expect_same(const RequestOutput& got, const RequestOutput& want, const std::string& what) {
  ASSERT_EQ(got.finish_reason, FinishReason::LENGTH) << what << ": " << got.error;
  EXPECT_EQ(got.tokens, want.tokens) << what;
  ASSERT_EQ(got.logits.size(), want.logits.size()) << what;
  for (size_t s = 0; s < got.logits.size(); ++s)
    ASSERT_EQ(got.logits[s], want.logits[s]) << what << ", step " << s;
}

void expect_no_leak(Engine& engine) {
  testing::expect_no_leak(engine);
  EXPECT_EQ(engine.stats().disk.n_pending, 0);
}

// Runs the prompts one after another, checking each against the reference; returns the prompt
// tokens that came from disk.
int64_t run_and_check(Engine& engine, const std::vector<Tokens>& ps, const std::string& what,
                      const std::string& model = tiny_model_path()) {
  const std::vector<RequestOutput>& want = reference(ps, model);
  int64_t from_disk = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    Result<RequestOutput> got = engine.run(greedy(ps[i]));
    EXPECT_TRUE(got.ok()) << got.error().message;
    if (!got.ok()) continue;
    expect_same(*got, want[i], what + ", prompt " + std::to_string(i));
    EXPECT_LE(got->stats.n_disk_cached_tokens, got->stats.n_cached_tokens);
    from_disk += got->stats.n_disk_cached_tokens;
  }
  return from_disk;
}

// The files in the tier's blocks/ folder: exactly the indexed blocks, none left behind.
int64_t block_files(const std::string& dir) {
  int64_t n = 0;
  for (const auto& tier : fs::directory_iterator(dir)) {
    if (!tier.is_directory()) continue;
    for (const auto& f : fs::directory_iterator(tier.path() / "blocks")) n += f.is_regular_file();
  }
  return n;
}

TEST(EngineDiskTierTest, OutputsEqualNoCacheAfterEvictionsToDiskLoadsAndRestarts) {
  const std::vector<Tokens> ps = prompts(7, 10);
  const std::string dir = fresh_dir("exact");
  {
    std::unique_ptr<Engine> engine = make_engine(disk_config(dir));
    ASSERT_NE(engine, nullptr);
    run_and_check(*engine, ps, "first run");
    EXPECT_GT(engine->stats().n_blocks_evicted, 0) << "the small pool should evict";
    engine->flush_cache();  // everything to disk
    EXPECT_GT(engine->stats().disk.n_blocks, 0);
    EXPECT_GT(run_and_check(*engine, ps, "after a flush to disk"), 0);
    EXPECT_GT(engine->stats().disk.n_blocks_read, 0);
    EXPECT_GT(engine->stats().n_disk_loads_staged, 0) << "the pool has no blocks to spare";
    expect_no_leak(*engine);
  }
  for (int restart = 1; restart <= 2; ++restart) {
    std::unique_ptr<Engine> engine = make_engine(disk_config(dir));
    ASSERT_NE(engine, nullptr);
    const EngineStats at_start = engine->stats();
    EXPECT_GT(at_start.disk.n_blocks, 0) << "the index is rebuilt at start";
    // The very first request after the restart finds its prefix on disk.
    Result<RequestOutput> first = engine->run(greedy(ps[0]));
    ASSERT_TRUE(first.ok()) << first.error().message;
    expect_same(*first, reference(ps)[0], "first after restart");
    EXPECT_GE(first->stats.n_disk_cached_tokens, kBlock);
    EXPECT_EQ(first->stats.n_disk_cached_tokens, first->stats.n_cached_tokens);
    EXPECT_GT(run_and_check(*engine, ps, "restart " + std::to_string(restart)), 0);
    EXPECT_EQ(engine->stats().disk.n_corrupt_dropped, 0);
    expect_no_leak(*engine);
  }
}

// A mixture of experts (gpt-oss: window layers, sinks, biased experts) keeps its KV on disk and
// reads it back as exactly as a dense model does.
TEST(EngineDiskTierTest, AMixtureOfExpertsGivesTheSameOutputsFromDiskAndAfterARestart) {
  const std::string& model = testing::tiny_moe_engine_model();
  const std::vector<Tokens> ps = prompts(13, 6);
  const std::string dir = fresh_dir("moe");
  {
    std::unique_ptr<Engine> engine = make_engine(disk_config(dir), model);
    ASSERT_NE(engine, nullptr);
    run_and_check(*engine, ps, "moe, first run", model);
    engine->flush_cache();
    EXPECT_GT(run_and_check(*engine, ps, "moe, after a flush to disk", model), 0);
    expect_no_leak(*engine);
  }
  std::unique_ptr<Engine> engine = make_engine(disk_config(dir), model);
  ASSERT_NE(engine, nullptr);
  EXPECT_GT(run_and_check(*engine, ps, "moe, after a restart", model), 0);
  expect_no_leak(*engine);
}

TEST(EngineDiskTierTest, ConcurrentRequestsWithLoadsGiveWhatTheyGiveAlone) {
  const std::vector<Tokens> ps = prompts(11, 12);
  const std::string dir = fresh_dir("concurrent");
  {
    std::unique_ptr<Engine> engine = make_engine(disk_config(dir));
    run_and_check(*engine, ps, "warm-up");
  }
  EngineConfig config = disk_config(dir);
  config.scheduler.max_batch_tokens = 24;
  config.scheduler.max_seqs = 5;
  std::unique_ptr<Engine> engine = make_engine(config);
  std::vector<RequestHandle> handles;
  for (const Tokens& p : ps) handles.push_back(*engine->submit(greedy(p)));
  int64_t from_disk = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    expect_same(handles[i].wait(), reference(ps)[i], "prompt " + std::to_string(i));
    from_disk += handles[i].wait().stats.n_disk_cached_tokens;
  }
  EXPECT_GT(from_disk, 0);
  EXPECT_GE(engine->stats().n_disk_hit_tokens, from_disk);  // loaded, whoever used them
  expect_no_leak(*engine);
}

TEST(EngineDiskTierTest, NamespacesStayApartAcrossRestarts) {
  const std::string dir = fresh_dir("namespaces");
  Tokens system(50);
  for (size_t i = 0; i < system.size(); ++i) system[i] = static_cast<TokenId>(700 + i);
  {
    std::unique_ptr<Engine> engine = make_engine(disk_config(dir));
    ASSERT_TRUE(engine->warm("tenant-a", system).ok());
  }
  std::unique_ptr<Engine> engine = make_engine(disk_config(dir));
  Tokens prompt = system;
  prompt.push_back(5);
  const RequestOutput other = *engine->run(greedy(prompt, "tenant-b"));
  EXPECT_EQ(other.stats.n_cached_tokens, 0);
  EXPECT_EQ(other.stats.n_disk_cached_tokens, 0);
  const RequestOutput none = *engine->run(greedy(prompt, ""));
  EXPECT_EQ(none.stats.n_disk_cached_tokens, 0);
  const RequestOutput own = *engine->run(greedy(prompt, "tenant-a"));
  EXPECT_EQ(own.stats.n_disk_cached_tokens, 50);  // six whole blocks and a partial one
  EXPECT_EQ(own.tokens, other.tokens);
  expect_no_leak(*engine);
}

TEST(EngineDiskTierTest, ASystemPromptSharedByTwoQuestionsComesBackWhole) {
  // bench restart in miniature: two questions after one system prompt of 50 tokens split the
  // tree at 50, inside block 6; after a restart a third question finds the whole system prompt
  // on disk: six whole blocks and the partial block of its last 2 tokens.
  const std::string dir = fresh_dir("split-system");
  Tokens system(50);
  for (size_t i = 0; i < system.size(); ++i) system[i] = static_cast<TokenId>(300 + i);
  auto ask = [&](TokenId question) {
    Tokens p = system;
    for (TokenId t = 0; t < 5; ++t) p.push_back(question + t);
    return greedy(p);
  };
  EngineConfig config = disk_config(dir);
  config.kv_tokens = 4 * kContext;  // nothing evicted before the end
  {
    std::unique_ptr<Engine> engine = make_engine(config);
    ASSERT_TRUE(engine->run(ask(1000)).ok());
    const RequestOutput hot = *engine->run(ask(1100));
    EXPECT_EQ(hot.stats.n_cached_tokens, 50);
  }
  std::unique_ptr<Engine> engine = make_engine(config);
  const RequestOutput warm = *engine->run(ask(1200));
  EXPECT_EQ(warm.stats.n_disk_cached_tokens, 50);
  EXPECT_EQ(warm.stats.n_cached_tokens, 50);
  // The pool had blocks to spare: the load went straight into it.
  EXPECT_EQ(engine->stats().n_disk_loads, 1);
  EXPECT_EQ(engine->stats().n_disk_loads_staged, 0);
  // The same outputs as with no cache at all.
  EngineConfig no_cache = config;
  no_cache.cache_dir.clear();
  no_cache.prefix_cache.enabled = false;
  const RequestOutput want = *make_engine(no_cache)->run(ask(1200));
  EXPECT_EQ(warm.tokens, want.tokens);
  EXPECT_EQ(warm.logits, want.logits);
  expect_no_leak(*engine);
}

// `count` consecutive token ids from `first`.
Tokens token_run(size_t count, int32_t first) {
  Tokens tokens(count);
  for (size_t i = 0; i < count; ++i)
    tokens[i] = static_cast<TokenId>(first + static_cast<int32_t>(i));
  return tokens;
}

// The scene of the two tests below: one request runs at a time (FCFS) over a pool of 26 blocks
// in which `shared` (8 blocks) and then `filler` (8) are cached; `big` (16 blocks) evicts `shared`
// while `again` (shared + 3 tokens) waits.
struct EvictedWhileWaiting {
  Tokens shared = token_run(60, 40);
  Tokens filler = token_run(60, 400);
  Tokens big = token_run(120, 900);
  Tokens again;
  EngineConfig config;

  explicit EvictedWhileWaiting(const std::string& dir) : again(shared), config(disk_config(dir)) {
    again.insert(again.end(), {7, 8, 9});
    config.kv_tokens = kContext + 10 * kBlock;
    config.scheduler.max_seqs = 1;
    config.scheduler.policy = SchedulePolicy::FCFS;
  }
  // An engine on the tier with `shared` and `filler` cached.
  std::unique_ptr<Engine> warmed_engine() const {
    std::unique_ptr<Engine> engine = make_engine(config);
    EXPECT_TRUE(engine->warm("", shared).ok());
    EXPECT_TRUE(engine->warm("", filler).ok());
    return engine;
  }
};

TEST(EngineDiskTierTest, APrefixEvictedWhileItsRequestWaitsIsReadBackBeforeItRuns) {
  // One request runs at a time (FCFS), over a pool of 26 blocks. `shared` (8 blocks), then
  // `filler` (8) are cached in memory; `big` (16) is submitted, then `again` (shared + more).
  // `again` may arrive while `shared` is still in memory, so that its arrival finds nothing to
  // load; `big` then evicts `shared` (the least recently used) to disk, and `again` must have it
  // read back while it waits (into the room `filler` leaves), not recompute it.
  const std::string dir = fresh_dir("evicted-while-waiting");
  const EvictedWhileWaiting scene(dir);
  const Tokens& big = scene.big;
  const Tokens& again = scene.again;
  for (int round = 0; round < 5; ++round) {
    std::unique_ptr<Engine> engine = scene.warmed_engine();
    RequestHandle first = *engine->submit(greedy(big));
    RequestHandle second = *engine->submit(greedy(again));
    const RequestOutput& got_big = first.wait();
    const RequestOutput& got = second.wait();
    expect_same(got_big, reference({big})[0], "big");
    expect_same(got, reference({again})[0], "again");
    EXPECT_GE(got.stats.n_disk_cached_tokens, 7 * kBlock) << "round " << round;
    expect_no_leak(*engine);
    engine.reset();
    fs::remove_all(dir);
  }
}

TEST(EngineDiskTierTest, NoOtherRequestTakesTheSlotWhileTheNextOnesPrefixIsReadBack) {
  // As above, with `other` (no prefix) submitted after `again`. When `big` ends, `again` is next
  // (FCFS) and has its prefix read back; admissions are held meanwhile, so `other` cannot take
  // the slot, run first and evict what was read: `again` starts first and finds its prefix.
  const std::string dir = fresh_dir("held-while-loading");
  const EvictedWhileWaiting scene(dir);
  const Tokens& big = scene.big;
  const Tokens& again = scene.again;
  const Tokens other = token_run(100, 1500);
  for (int round = 0; round < 3; ++round) {
    std::unique_ptr<Engine> engine = scene.warmed_engine();
    RequestHandle first = *engine->submit(greedy(big));
    RequestHandle second = *engine->submit(greedy(again));
    RequestHandle third = *engine->submit(greedy(other));
    first.wait();
    const RequestOutput& got = second.wait();
    const RequestOutput& got_other = third.wait();
    expect_same(got, reference({again})[0], "again");
    expect_same(got_other, reference({other})[0], "other");
    EXPECT_GE(got.stats.n_disk_cached_tokens, 7 * kBlock) << "round " << round;
    EXPECT_LT(got.stats.queue_ms, got_other.stats.queue_ms)
        << "round " << round << ": `other` was admitted while `again` waited on its load";
    expect_no_leak(*engine);
    engine.reset();
    fs::remove_all(dir);
  }
}

TEST(EngineDiskTierTest, ATierOfAnotherBlockSizeIsIgnoredWithOneLogLine) {
  const std::vector<Tokens> ps = prompts(5, 4);
  const std::string dir = fresh_dir("block-size");
  {
    std::unique_ptr<Engine> engine = make_engine(disk_config(dir));
    run_and_check(*engine, ps, "block size 8");
  }
  std::vector<std::string> log;
  EngineConfig config = disk_config(dir, &log);
  config.block_size = 2 * kBlock;
  std::unique_ptr<Engine> engine = make_engine(config);
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->stats().disk.n_blocks, 0);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("ignoring 1 tier"), std::string::npos) << log[0];
  for (const Tokens& p : ps) EXPECT_EQ(engine->run(greedy(p))->stats.n_disk_cached_tokens, 0);
}

TEST(EngineDiskTierTest, AQuantizedTierIsExactAndATierOfAnotherKvTypeIsNotUsed) {
  // q8_0 blocks go to disk and come back bit for bit (a restarted q8_0 engine gives the first
  // run's logits from disk); an f16 engine on the same directory does not read them (records are
  // bound to the tier's identity, KV type included) and says so.
  const std::vector<Tokens> ps = prompts(6, 4);
  const std::string dir = fresh_dir("kv-type");
  EngineConfig q8 = disk_config(dir);
  q8.kv_types = KvTypes::both(KvType::Q8_0);
  std::vector<RequestOutput> first;
  {
    std::unique_ptr<Engine> engine = make_engine(q8);
    ASSERT_NE(engine, nullptr);
    for (const Tokens& p : ps) first.push_back(*engine->run(greedy(p)));
    engine->flush_cache();
    EXPECT_GT(engine->stats().disk.n_blocks, 0);
  }
  {
    std::vector<std::string> log;
    std::unique_ptr<Engine> engine = make_engine(disk_config(dir, &log));
    ASSERT_NE(engine, nullptr);
    EXPECT_EQ(engine->stats().disk.n_blocks, 0);
    ASSERT_EQ(log.size(), 1u);
    EXPECT_NE(log[0].find("written with KV type q8_0 is not used: this run's KV type is f16"),
              std::string::npos)
        << log[0];
    for (const Tokens& p : ps) EXPECT_EQ(engine->run(greedy(p))->stats.n_disk_cached_tokens, 0);
  }
  std::unique_ptr<Engine> engine = make_engine(q8);
  ASSERT_NE(engine, nullptr);
  int64_t from_disk = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    Result<RequestOutput> got = engine->run(greedy(ps[i]));
    ASSERT_TRUE(got.ok()) << got.error().message;
    expect_same(*got, first[i], "q8_0 after a restart, prompt " + std::to_string(i));
    from_disk += got->stats.n_disk_cached_tokens;
  }
  EXPECT_GT(from_disk, 0);
  expect_no_leak(*engine);
}

TEST(EngineDiskTierTest, TwoEnginesOnOneDirectoryAreRefused) {
  const std::string dir = fresh_dir("two");
  std::unique_ptr<Engine> first = make_engine(disk_config(dir));
  ASSERT_NE(first, nullptr);
  Result<std::unique_ptr<Engine>> second = Engine::create(tiny_model_path(), disk_config(dir));
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message.find("in use by another process"), std::string::npos)
      << second.error().message;
}

TEST(EngineDiskTierTest, CorruptAndTruncatedTierFilesAreDroppedAndRecomputed) {
  const std::vector<Tokens> ps = prompts(13, 8);
  const std::string dir = fresh_dir("corrupt");
  {
    std::unique_ptr<Engine> engine = make_engine(disk_config(dir));
    run_and_check(*engine, ps, "writing");
  }
  // Every other block file gets a flipped byte in its K/V; every third is cut short.
  int n = 0;
  for (const auto& tier : fs::directory_iterator(dir)) {
    if (!tier.is_directory()) continue;
    for (const auto& f : fs::directory_iterator(tier.path() / "blocks")) {
      ++n;
      if (n % 3 == 0) {
        fs::resize_file(f.path(), fs::file_size(f.path()) / 2);
      } else if (n % 2 == 0) {
        std::fstream io(f.path(), std::ios::in | std::ios::out | std::ios::binary);
        io.seekp(static_cast<std::streamoff>(fs::file_size(f.path()) / 2));
        io.put('\x7f');
      }
    }
  }
  ASSERT_GT(n, 3);
  std::unique_ptr<Engine> engine = make_engine(disk_config(dir));
  run_and_check(*engine, ps, "after corruption");
  run_and_check(*engine, ps, "again");
  EXPECT_GT(engine->stats().disk.n_corrupt_dropped, 0);
  expect_no_leak(*engine);
}

TEST(EngineDiskTierTest, ATinyDiskBudgetEvictsOnDiskAndLeaksNothing) {
  const std::vector<Tokens> ps = prompts(17, 16);
  const std::string dir = fresh_dir("budget");
  EngineConfig config = disk_config(dir);
  std::unique_ptr<Engine> probe = make_engine(config);
  ASSERT_NE(probe, nullptr);
  const int64_t record_bytes =
      probe->stats().disk.budget_bytes > 0
          ? static_cast<int64_t>(probe->kv_bytes()) / probe->stats().n_blocks_total
          : 0;
  probe.reset();
  config.cache_disk_bytes = 6 * (record_bytes + 4096);  // about six blocks
  std::unique_ptr<Engine> engine = make_engine(config);
  ASSERT_NE(engine, nullptr);
  for (int round = 0; round < 3; ++round) {
    run_and_check(*engine, ps, "round " + std::to_string(round));
    engine->flush_cache();
    EXPECT_LE(engine->stats().disk.n_bytes, config.cache_disk_bytes);
  }
  EXPECT_GT(engine->stats().disk.n_blocks_evicted, 0);
  expect_no_leak(*engine);
  EXPECT_EQ(block_files(dir), engine->stats().disk.n_blocks);
}

// Concurrent submissions in several namespaces, some cancelled at once (possibly while their
// prefix is being read from disk), flushes to disk in between, over a tiny pool and a disk budget
// of a few blocks: every request that ends normally gives the reference output, and afterwards no
// block is held in the pool and the disk holds exactly its indexed blocks.
TEST(EngineDiskTierTest, StressWithCancellationsLeaksNothingInEitherTier) {
  const std::vector<Tokens> ps = prompts(23, 10);
  const std::vector<RequestOutput>& want = reference(ps);
  const std::string dir = fresh_dir("stress");
  EngineConfig config = disk_config(dir);
  config.scheduler.max_batch_tokens = 24;
  config.scheduler.max_seqs = 4;
  std::mt19937 rng(5);
  int64_t disk_hit_tokens = 0;
  for (int round = 0; round < 4; ++round) {
    config.cache_disk_bytes = round % 2 == 0 ? (int64_t{64} << 20) : (int64_t{1} << 20);
    std::unique_ptr<Engine> engine = make_engine(config);
    ASSERT_NE(engine, nullptr);
    for (int wave = 0; wave < 3; ++wave) {
      std::vector<std::pair<size_t, RequestHandle>> handles;
      for (int k = 0; k < 8; ++k) {
        const size_t i = rng() % ps.size();
        // Outputs do not depend on the namespace: the reference holds for both.
        Result<RequestHandle> h = engine->submit(greedy(ps[i], rng() % 2 ? "a" : ""));
        ASSERT_TRUE(h.ok()) << h.error().message;
        if (rng() % 4 == 0) h->cancel();
        handles.emplace_back(i, *h);
      }
      for (auto& [i, h] : handles) {
        const RequestOutput& got = h.wait();
        if (got.finish_reason == FinishReason::CANCELLED) continue;
        expect_same(got, want[i],
                    "round " + std::to_string(round) + ", prompt " + std::to_string(i));
      }
      if (wave == 1) engine->flush_cache();
    }
    expect_no_leak(*engine);
    EXPECT_EQ(block_files(dir), engine->stats().disk.n_blocks);
    EXPECT_LE(engine->stats().disk.n_bytes, config.cache_disk_bytes);
    disk_hit_tokens += engine->stats().n_disk_hit_tokens;
  }
  EXPECT_GT(disk_hit_tokens, 0) << "the stress never loaded from disk";
}

// A child process runs requests over a disk tier (and flushes to it) until it is killed with
// SIGKILL at a random moment; each time, a new engine on the directory must open and reproduce
// the reference outputs exactly.
TEST(EngineDiskTierTest, KillingTheProcessAtAnyMomentNeverYieldsWrongKv) {
  const std::vector<Tokens> ps = prompts(19, 6);
  const std::vector<RequestOutput>& want = reference(ps);
  const std::string dir = fresh_dir("crash");
  std::mt19937 rng(99);
  int64_t max_blocks_seen = 0;
  for (int round = 0; round < 6; ++round) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      Result<std::unique_ptr<Engine>> engine = Engine::create(tiny_model_path(), disk_config(dir));
      if (!engine.ok()) ::_exit(3);
      for (size_t i = 0;; ++i) {
        (void)(*engine)->run(greedy(ps[i % ps.size()]));
        if (i % 3 == 2) (*engine)->flush_cache();
      }
    }
    ::usleep(static_cast<useconds_t>(std::uniform_int_distribution<int>(50000, 400000)(rng)));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the child ended by itself: " << status;
    std::unique_ptr<Engine> engine = make_engine(disk_config(dir));
    ASSERT_NE(engine, nullptr);
    max_blocks_seen = std::max(max_blocks_seen, engine->stats().disk.n_blocks);
    for (size_t i = 0; i < ps.size(); ++i)
      expect_same(*engine->run(greedy(ps[i])), want[i], "round " + std::to_string(round));
    EXPECT_EQ(engine->stats().disk.n_corrupt_dropped, 0);
  }
  EXPECT_GT(max_blocks_seen, 0) << "the killed processes never wrote: the test tested nothing";
}

}  // namespace
}  // namespace trellis
