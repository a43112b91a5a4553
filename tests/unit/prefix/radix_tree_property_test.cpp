// Randomized property test of RadixTree + BlockPool against a naive reference model.
//
// Simulated requests (in three namespaces) start, decode, cache their whole blocks mid-run, finish
// or are cancelled; extra locks come and go; random evictions and queries happen in between, with
// random block sizes, pool sizes and both match modes. A fake KV memory records which token each
// block slot holds, so every match is checked for content, not only length, and every write is
// checked to land in a block nobody else can see.
//
// The reference model keeps, per namespace, the list of cached token sequences. A match is the
// longest common prefix with any of them (capped, rounded down to whole blocks in BLOCK mode).
// Eviction is reported by the tree; the reference checks that the node was a leaf of the cached
// set and not on a locked path, then truncates the sequences through it.
//
// After every step: check_invariants() on the tree and pool, and every block's refcount equals
// its tree slots plus the request references the test holds on it.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kv/block_pool.h"
#include "prefix/radix_tree.h"

namespace trellis {
namespace {

using Tokens = std::vector<TokenId>;

int32_t common_prefix(const Tokens& a, const Tokens& b, size_t n_b) {
  size_t n = std::min(a.size(), n_b);
  size_t k = 0;
  while (k < n && a[k] == b[k]) ++k;
  return static_cast<int32_t>(k);
}

struct ReferenceModel {
  std::map<std::string, std::vector<Tokens>> cached;

  int32_t match(const std::string& ns, const Tokens& tokens, int32_t max_tokens,
                const RadixTreeConfig& config) const {
    int32_t best = 0;
    auto it = cached.find(ns);
    if (it != cached.end())
      for (const Tokens& s : it->second)
        best = std::max(best, common_prefix(s, tokens, tokens.size()));
    best = std::min(best, std::max(max_tokens, 0));
    if (config.mode == MatchMode::BLOCK) best = best / config.block_size * config.block_size;
    return best;
  }

  void insert(const std::string& ns, const Tokens& tokens, int32_t n_tokens) {
    if (n_tokens > 0) cached[ns].emplace_back(tokens.begin(), tokens.begin() + n_tokens);
  }
};

struct ActiveLock {
  std::string ns;
  Tokens path;  // the locked prefix
  PrefixLock lock;
};

struct SimRequest {
  std::string ns;
  Tokens tokens;  // every token's KV is written
  std::vector<BlockId> table;
  std::unique_ptr<ActiveLock> lock;
};

class Simulation {
 public:
  Simulation(uint32_t seed, RadixTreeConfig config, int32_t n_blocks)
      : rng_(seed),
        config_(config),
        pool_(n_blocks),
        tree_(pool_, config),
        kv_(static_cast<size_t>(n_blocks), Tokens(static_cast<size_t>(config.block_size), -1)) {
    // A few stems that prompts start from, so that prefixes are shared at every offset.
    for (int i = 0; i < 4; ++i) {
      Tokens stem;
      const int n = uniform(4, 40);
      for (int k = 0; k < n; ++k) stem.push_back(uniform(0, 5));
      stems_.push_back(stem);
    }
  }

  void run(int n_steps) {
    for (step_ = 0; step_ < n_steps && !::testing::Test::HasFailure(); ++step_) {
      const int op = uniform(0, 99);
      if (op < 22) {
        start_request();
      } else if (op < 42) {
        decode();
      } else if (op < 50) {
        cache_whole_blocks();
      } else if (op < 65) {
        end_request(/*cache=*/true);
      } else if (op < 68) {
        end_request(/*cache=*/false);
      } else if (op < 76) {
        evict(uniform(1, 5));
      } else if (op < 86) {
        query();
      } else if (op < 92) {
        add_lock();
      } else {
        drop_lock();
      }
      check();
    }
    // Leak check: every request ends, every lock goes, the cache is flushed: all blocks free.
    while (!requests_.empty()) end_request(uniform(0, 1) == 0);
    locks_.clear();
    check();
    evict(pool_.n_total() + 1);
    EXPECT_EQ(pool_.n_free(), pool_.n_total()) << where();
    EXPECT_EQ(pool_.n_cached(), 0);
    EXPECT_EQ(tree_.n_nodes(), 0);
    EXPECT_EQ(tree_.n_namespaces(), 0);
    for (auto& [ns, seqs] : reference_.cached)
      EXPECT_TRUE(seqs.empty()) << "the reference still caches sequences of \"" << ns << "\"";
    check();
  }

  int64_t n_matched_tokens() const { return n_matched_tokens_; }
  int64_t n_evicted_nodes() const { return n_evicted_nodes_; }
  int64_t n_partial_matches() const { return n_partial_matches_; }
  int64_t n_shared_tail_checks() const { return n_shared_tail_checks_; }

 private:
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  std::string where() const {
    return "step " + std::to_string(step_) + ", block size " + std::to_string(config_.block_size) +
           (config_.mode == MatchMode::BLOCK ? " (block mode)" : " (token mode)") + "\n" +
           tree_.debug_string();
  }
  int32_t B() const { return config_.block_size; }

  Tokens random_prompt() {
    const Tokens& stem = stems_[static_cast<size_t>(uniform(0, 3))];
    Tokens t(stem.begin(), stem.begin() + uniform(0, static_cast<int>(stem.size())));
    const int extra = uniform(t.empty() ? 1 : 0, 12);
    for (int k = 0; k < extra; ++k) t.push_back(uniform(0, 5));
    return t;
  }
  std::string random_ns() {
    static const char* const kNames[] = {"", "", "a", "b"};
    return kNames[uniform(0, 3)];
  }

  // Checks a match against the reference and that its blocks hold the matched tokens.
  void check_match(const std::string& ns, const Tokens& tokens, int32_t max_tokens,
                   const PrefixMatch& m) {
    ASSERT_EQ(m.n_tokens, reference_.match(ns, tokens, max_tokens, config_))
        << "namespace \"" << ns << "\", " << where();
    ASSERT_EQ(m.n_full_blocks, m.n_tokens / B());
    ASSERT_EQ(m.n_partial_slots, config_.mode == MatchMode::TOKEN ? m.n_tokens % B() : 0);
    ASSERT_EQ(static_cast<int32_t>(m.blocks.size()), (m.n_tokens + B() - 1) / B());
    ASSERT_EQ(m.node == nullptr, m.n_tokens == 0);
    for (int32_t p = 0; p < m.n_tokens; ++p) {
      const BlockId b = m.blocks[static_cast<size_t>(p / B())];
      ASSERT_GT(pool_.tree_refs(b), 0) << "matched block " << b << " is not cached";
      ASSERT_EQ(kv_[static_cast<size_t>(b)][static_cast<size_t>(p % B())],
                tokens[static_cast<size_t>(p)])
          << "block " << b << " slot " << p % B() << ", " << where();
    }
    n_matched_tokens_ += m.n_tokens;
    n_partial_matches_ += m.has_partial_block() ? 1 : 0;
  }

  // Writes the KV of position p of request r; the block must be the request's alone.
  void write(SimRequest& r, int32_t p) {
    const BlockId b = r.table[static_cast<size_t>(p / B())];
    ASSERT_EQ(pool_.refcount(b), 1) << "writing into shared block " << b << ", " << where();
    ASSERT_EQ(pool_.tree_refs(b), 0) << "writing into cached block " << b << ", " << where();
    kv_[static_cast<size_t>(b)][static_cast<size_t>(p % B())] = r.tokens[static_cast<size_t>(p)];
  }

  // Frees room for n more blocks if eviction can; returns whether n can be allocated.
  bool make_room(int32_t n) {
    if (pool_.n_free() + tree_.count_evictable_blocks() < n) return false;  // prepare
    if (!pool_.can_alloc(n)) evict(n - pool_.n_free());                     // commit
    EXPECT_TRUE(pool_.can_alloc(n)) << "count_evictable_blocks() promised too much, " << where();
    return pool_.can_alloc(n);
  }

  void start_request() {
    if (requests_.size() >= 6) return;
    auto r = std::make_unique<SimRequest>();
    r->ns = random_ns();
    r->tokens = random_prompt();
    const int32_t n = static_cast<int32_t>(r->tokens.size());
    PrefixMatch m = tree_.match_prefix(r->ns, r->tokens, n - 1);
    check_match(r->ns, r->tokens, n - 1, m);
    if (::testing::Test::HasFailure()) return;
    auto lock = std::make_unique<ActiveLock>();
    lock->ns = r->ns;
    lock->path.assign(r->tokens.begin(), r->tokens.begin() + m.n_tokens);
    lock->lock = tree_.lock(m);
    r->lock = std::move(lock);
    const int32_t need = (n + B() - 1) / B() - m.n_full_blocks;
    if (!make_room(need)) return;  // abandoned: the lock goes with r
    for (int32_t i = 0; i < m.n_full_blocks; ++i) {
      pool_.retain(m.blocks[static_cast<size_t>(i)]);
      r->table.push_back(m.blocks[static_cast<size_t>(i)]);
    }
    pool_.alloc(need, r->table);
    if (m.has_partial_block()) {  // copy-on-write of the partially matched block
      const BlockId dst = r->table[static_cast<size_t>(m.n_full_blocks)];
      std::copy_n(kv_[static_cast<size_t>(m.partial_block())].begin(), m.n_partial_slots,
                  kv_[static_cast<size_t>(dst)].begin());
    }
    for (int32_t p = m.n_tokens; p < n; ++p) write(*r, p);  // prefill of the unmatched suffix
    requests_.push_back(std::move(r));
  }

  SimRequest* pick_request() {
    if (requests_.empty()) return nullptr;
    return requests_[static_cast<size_t>(uniform(0, static_cast<int>(requests_.size()) - 1))].get();
  }

  void decode() {
    SimRequest* r = pick_request();
    if (r == nullptr) return;
    const int32_t p = static_cast<int32_t>(r->tokens.size());
    if (p % B() == 0) {
      if (!make_room(1)) return;
      pool_.alloc(1, r->table);
    }
    r->tokens.push_back(uniform(0, 5));
    write(*r, p);
  }

  // A running request caches its whole blocks (it keeps writing into later blocks).
  void cache_whole_blocks() {
    SimRequest* r = pick_request();
    if (r == nullptr) return;
    const int32_t n_blocks = static_cast<int32_t>(r->tokens.size()) / B();
    const std::span<const TokenId> tokens(r->tokens.data(), static_cast<size_t>(n_blocks * B()));
    const std::span<const BlockId> blocks(r->table.data(), static_cast<size_t>(n_blocks));
    InsertResult result = tree_.insert(r->ns, tokens, blocks);
    EXPECT_EQ(result.n_taken + result.n_not_taken, n_blocks);
    reference_.insert(r->ns, r->tokens, n_blocks * B());
  }

  void end_request(bool cache) {
    if (requests_.empty()) return;
    const size_t i = static_cast<size_t>(uniform(0, static_cast<int>(requests_.size()) - 1));
    SimRequest& r = *requests_[i];
    if (cache) {
      InsertResult result = tree_.insert(r.ns, r.tokens, r.table);
      EXPECT_EQ(result.n_taken + result.n_not_taken, static_cast<int32_t>(r.table.size()));
      const int32_t n = static_cast<int32_t>(r.tokens.size());
      reference_.insert(r.ns, r.tokens, config_.mode == MatchMode::BLOCK ? n / B() * B() : n);
    }
    pool_.release_all(r.table);
    requests_.erase(requests_.begin() + static_cast<std::ptrdiff_t>(i));
  }

  void evict(int32_t n) {
    const int32_t free_before = pool_.n_free();
    const int32_t freed = tree_.evict(n, [&](const EvictedNode& e) { on_evicted(e); });
    EXPECT_EQ(pool_.n_free(), free_before + freed);
    if (freed < n) {
      EXPECT_EQ(tree_.count_evictable_blocks(), 0) << "stopped early, " << where();
    }
  }

  void on_evicted(const EvictedNode& e) {
    ++n_evicted_nodes_;
    const std::string ns(e.ns);
    const Tokens path(e.path.begin(), e.path.end());
    const int32_t end = static_cast<int32_t>(path.size());
    ASSERT_LT(e.start, end);
    for (BlockId b : e.blocks) {
      ASSERT_EQ(pool_.request_refs(b), 0)
          << "evicted block " << b << " that a request holds, " << where();
    }
    for (const auto& l : locks_) {
      if (l->ns != ns) continue;
      const int32_t n = static_cast<int32_t>(l->path.size());
      ASSERT_FALSE(n > e.start && common_prefix(l->path, path, path.size()) >= std::min(n, end))
          << "evicted a locked node [" << e.start << "," << end << "), " << where();
    }
    for (const auto& r : requests_) {
      if (r->ns != ns || !r->lock) continue;
      const Tokens& lp = r->lock->path;
      const int32_t n = static_cast<int32_t>(lp.size());
      ASSERT_FALSE(n > e.start && common_prefix(lp, path, path.size()) >= std::min(n, end))
          << "evicted a node a request locked [" << e.start << "," << end << "), " << where();
    }
    // Every cached sequence entering the node's edge ends inside it or at its end (else the
    // node would have a child or have been split) and loses the edge's positions.
    bool found = false;
    for (Tokens& s : reference_.cached[ns]) {
      const int32_t cp = common_prefix(s, path, path.size());
      if (cp <= e.start) continue;
      ASSERT_EQ(static_cast<int32_t>(s.size()), cp)
          << "evicted [" << e.start << "," << end << ") below which more is cached, " << where();
      found = found || cp == end;
      s.resize(static_cast<size_t>(e.start));
    }
    ASSERT_TRUE(found) << "evicted a sequence the reference does not cache, " << where();
    auto& seqs = reference_.cached[ns];
    seqs.erase(std::remove_if(seqs.begin(), seqs.end(), [](const Tokens& s) { return s.empty(); }),
               seqs.end());
  }

  void query() {
    const std::string ns = random_ns();
    const Tokens t = random_prompt();
    const int32_t cap = uniform(0, 1) == 0 ? static_cast<int32_t>(t.size()) - 1
                                           : uniform(0, static_cast<int>(t.size()) + 2);
    check_match(ns, t, cap, tree_.match_prefix(ns, t, cap));
  }

  void add_lock() {
    if (locks_.size() >= 3) return;
    auto l = std::make_unique<ActiveLock>();
    l->ns = random_ns();
    const Tokens t = random_prompt();
    PrefixMatch m = tree_.match_prefix(l->ns, t, static_cast<int32_t>(t.size()));
    check_match(l->ns, t, static_cast<int32_t>(t.size()), m);
    l->path.assign(t.begin(), t.begin() + m.n_tokens);
    l->lock = tree_.lock(m);
    locks_.push_back(std::move(l));
  }

  void drop_lock() {
    if (locks_.empty()) return;
    locks_.erase(locks_.begin() + uniform(0, static_cast<int>(locks_.size()) - 1));
  }

  void check() {
    Status status = tree_.check_invariants();
    ASSERT_TRUE(status.ok()) << status.error().message << "\n" << where();
    std::vector<int32_t> request_refs(static_cast<size_t>(pool_.n_total()), 0);
    for (const auto& r : requests_)
      for (BlockId b : r->table) ++request_refs[static_cast<size_t>(b)];
    for (BlockId b = 0; b < pool_.n_total(); ++b) {
      ASSERT_EQ(pool_.refcount(b), pool_.tree_refs(b) + request_refs[static_cast<size_t>(b)])
          << "block " << b << ", " << where();
      n_shared_tail_checks_ += pool_.tree_refs(b) >= 2 ? 1 : 0;
    }
    ASSERT_EQ(pool_.n_free() + pool_.n_used(), pool_.n_total());
  }

  std::mt19937 rng_;
  RadixTreeConfig config_;
  BlockPool pool_;
  RadixTree tree_;
  std::vector<Tokens> kv_;  // [block][slot] -> the token whose KV the slot holds
  std::vector<Tokens> stems_;
  ReferenceModel reference_;
  std::vector<std::unique_ptr<SimRequest>> requests_;
  std::vector<std::unique_ptr<ActiveLock>> locks_;
  int step_ = 0;
  int64_t n_matched_tokens_ = 0;
  int64_t n_evicted_nodes_ = 0;
  int64_t n_partial_matches_ = 0;     // matches reporting a partial block (token mode)
  int64_t n_shared_tail_checks_ = 0;  // block checks that met a block in two tree slots
};

TEST(RadixTreePropertyTest, MatchesReferenceModelUnderRandomOperations) {
  int64_t n_matched = 0;
  int64_t n_evicted = 0;
  int64_t n_partial = 0;
  int64_t n_shared = 0;
  const int32_t kBlockSizes[] = {1, 2, 3, 4, 5, 8, 16};
  for (uint32_t seed = 1; seed <= 64; ++seed) {
    std::mt19937 pick(seed * 7919u);
    RadixTreeConfig config;
    config.block_size = kBlockSizes[pick() % 7];
    config.mode = seed % 2 == 0 ? MatchMode::BLOCK : MatchMode::TOKEN;
    // From a pool that evicts constantly to one that rarely does (prompts are < 60 tokens).
    const int32_t n_blocks = 70 / config.block_size + 1 + static_cast<int32_t>(pick() % 40);
    SCOPED_TRACE("seed " + std::to_string(seed));
    Simulation sim(seed, config, n_blocks);
    sim.run(1500);
    if (::testing::Test::HasFailure()) return;
    n_matched += sim.n_matched_tokens();
    n_evicted += sim.n_evicted_nodes();
    n_partial += sim.n_partial_matches();
    n_shared += sim.n_shared_tail_checks();
  }
  // The workload must exercise sharing and eviction, or the test proves little.
  EXPECT_GT(n_matched, 35000);
  EXPECT_GT(n_evicted, 9000);
  EXPECT_GT(n_partial, 2000);
  EXPECT_GT(n_shared, 50000);
}

}  // namespace
}  // namespace trellis
