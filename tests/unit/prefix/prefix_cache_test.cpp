// PrefixCache: a request's lifecycle over the pool, the tree and the KV memory, on a pool of 11
// blocks of 4 tokens whose "KV" is one float per position (key = token, value = -token), so that
// the tests can check which block holds what.
#include "prefix/prefix_cache.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "unit/prefix/prefix_test_support.h"

namespace trellis {
namespace {

using prefix_test::concat;
using prefix_test::range;
using Tokens = std::vector<TokenId>;
using Blocks = std::vector<BlockId>;
constexpr int32_t B = 4;

struct Fixture {
  BlockPool pool{11};
  KvStorage kv =
      std::move(KvStorage::create(KvLayout{1, 1, 1, B, KvTypes::both(KvType::F32)}, 11).value());
  PrefixCache cache;

  explicit Fixture(PrefixCacheConfig config = {}) : cache(pool, kv, config) {}

  float key_at(const SequenceKv& seq, int32_t position) const {
    float k = 0;
    std::memcpy(&k,
                kv.keys(seq.block_table()[static_cast<size_t>(position / B)], 0, 0) +
                    sizeof(float) * static_cast<size_t>(position % B),
                sizeof(float));
    return k;
  }
  // Stands for the forward pass: writes the "KV" of tokens[first, end) into seq's blocks.
  void compute(const SequenceKv& seq, const Tokens& tokens, int32_t first) {
    for (auto p = static_cast<size_t>(first); p < tokens.size(); ++p) {
      const BlockId block = seq.block_table()[p / B];
      const auto k = static_cast<float>(tokens[p]);
      const float v = -k;
      std::memcpy(kv.keys(block, 0, 0) + sizeof(float) * (p % B), &k, sizeof(float));
      std::memcpy(kv.values(block, 0, 0) + sizeof(float) * (p % B), &v, sizeof(float));
    }
  }
  // A whole request: admit, compute what was not matched, cache, release.
  SequenceKv run(std::string_view ns, const Tokens& tokens) {
    const PrefixMatch m = cache.match(ns, tokens);
    Result<SequenceKv> seq = cache.admit(ns, m, static_cast<int32_t>(tokens.size()));
    EXPECT_TRUE(seq.ok()) << seq.error().message;
    compute(*seq, tokens, m.n_tokens);
    for (size_t p = 0; p < tokens.size(); ++p)
      EXPECT_EQ(key_at(*seq, static_cast<int32_t>(p)), static_cast<float>(tokens[p])) << p;
    cache.insert(*seq, tokens, /*finished=*/true);
    return std::move(seq).value();
  }
  void expect_ok() const {
    Status status = cache.check_invariants();
    EXPECT_TRUE(status.ok()) << (status.ok() ? "" : status.error().message);
  }
};

TEST(PrefixCacheTest, FirstRequestAllocatesItsBlocksAndCachesThemAtTheEnd) {
  Fixture f;
  const Tokens t = range(1, 10);
  const PrefixMatch m = f.cache.match("", t);
  EXPECT_EQ(m.n_tokens, 0);
  Result<SequenceKv> seq = f.cache.admit("", m, 10);
  ASSERT_TRUE(seq.ok());
  EXPECT_EQ(seq->block_table(), (Blocks{0, 1, 2}));
  EXPECT_EQ(seq->capacity_tokens(), 12);
  EXPECT_EQ(seq->n_blocks_allocated(), 3);
  EXPECT_EQ(seq->n_blocks_acquired(), 0);
  f.compute(*seq, t, 0);
  // While the request runs only whole blocks are cached: the last one is still being written.
  f.cache.insert(*seq, t, /*finished=*/false);
  EXPECT_EQ(f.cache.tree().debug_string(), "ns \"\":\n  [0,8) 1,2,3,4,5,6,7,8 blocks=0,1\n");
  f.cache.insert(*seq, t, /*finished=*/true);
  EXPECT_EQ(f.cache.tree().debug_string(),
            "ns \"\":\n"
            "  [0,8) 1,2,3,4,5,6,7,8 blocks=0,1\n"
            "    [8,10) 9,10 tail=2\n");
  EXPECT_EQ(f.pool.n_in_use(), 3);
  seq->reset();
  EXPECT_EQ(f.pool.n_in_use(), 0);
  EXPECT_EQ(f.pool.n_cached_only(), 3);
  f.expect_ok();
}

TEST(PrefixCacheTest, TokenModeSharesWholeBlocksAndCopiesThePartialOne) {
  Fixture f;
  f.run("", range(1, 10));
  // Shares 6 tokens: block 0 whole, slots 0-1 of block 1 copied into a fresh block.
  const Tokens t = concat(range(1, 6), {60, 70, 80});
  const PrefixMatch m = f.cache.match("", t);
  EXPECT_EQ(m.n_tokens, 6);
  EXPECT_EQ(m.n_partial_slots, 2);
  Result<SequenceKv> seq = f.cache.admit("", m, 9);
  ASSERT_TRUE(seq.ok());
  EXPECT_EQ(seq->block_table(), (Blocks{0, 3, 4}));
  EXPECT_EQ(seq->n_cached_tokens(), 6);
  EXPECT_EQ(seq->n_blocks_acquired(), 1);
  EXPECT_EQ(seq->n_blocks_allocated(), 2);
  EXPECT_EQ(f.pool.refcount(0), 2);
  // The copy holds the matched tokens' KV; the cached block 1 is untouched afterwards.
  EXPECT_EQ(f.key_at(*seq, 4), 5.0f);
  EXPECT_EQ(f.key_at(*seq, 5), 6.0f);
  f.compute(*seq, t, 6);
  float cached_slot2 = 0;
  std::memcpy(&cached_slot2, f.kv.keys(1, 0, 0) + 2 * sizeof(float), sizeof(float));
  EXPECT_EQ(cached_slot2, 7.0f);
  f.expect_ok();
}

TEST(PrefixCacheTest, BlockModeSharesWholeBlocksOnly) {
  Fixture f(PrefixCacheConfig{true, MatchMode::BLOCK});
  f.run("", range(1, 10));
  EXPECT_EQ(f.cache.tree().debug_string(), "ns \"\":\n  [0,8) 1,2,3,4,5,6,7,8 blocks=0,1\n");
  const Tokens t = concat(range(1, 6), {60, 70, 80});
  const PrefixMatch m = f.cache.match("", t);
  EXPECT_EQ(m.n_tokens, 4);
  EXPECT_FALSE(m.has_partial_block());
  SequenceKv seq = f.run("", t);
  EXPECT_EQ(seq.n_cached_tokens(), 4);
  // Block 2 (positions 8-9 of the first request) was not cached, so it was freed first.
  EXPECT_EQ(seq.block_table(), (Blocks{0, 2, 3}));
  f.expect_ok();
}

TEST(PrefixCacheTest, TheLastPromptTokenIsAlwaysComputed) {
  Fixture f;
  f.run("", range(1, 8));
  const Tokens t = range(1, 8);
  const PrefixMatch m = f.cache.match("", t);
  EXPECT_EQ(m.n_tokens, 7);
  EXPECT_EQ(f.cache.match("", Tokens{1}).n_tokens, 0);
  EXPECT_EQ(f.cache.match("", Tokens{}).n_tokens, 0);
}

TEST(PrefixCacheTest, DisabledSharesAndCachesNothing) {
  Fixture f(PrefixCacheConfig{false, MatchMode::TOKEN});
  f.run("", range(1, 10));
  EXPECT_EQ(f.pool.n_free(), 11);
  SequenceKv seq = f.run("", range(1, 10));
  EXPECT_EQ(seq.n_cached_tokens(), 0);
  EXPECT_EQ(seq.n_blocks_allocated(), 3);
  EXPECT_EQ(f.cache.tree().n_nodes(), 0);
  seq.reset();
  EXPECT_EQ(f.pool.n_free(), 11);
  EXPECT_EQ(f.pool.n_evicted(), 0);
}

TEST(PrefixCacheTest, NamespacesDoNotShare) {
  Fixture f;
  f.run("alice", range(1, 10));
  EXPECT_EQ(f.cache.match("bob", range(1, 10)).n_tokens, 0);
  EXPECT_EQ(f.cache.match("alice", range(1, 10)).n_tokens, 9);
  EXPECT_EQ(f.cache.match("", range(1, 10)).n_tokens, 0);
}

TEST(PrefixCacheTest, ReserveGrowsTheTableEvictingCachedLeaves) {
  Fixture f;
  f.run("", range(100, 111));  // 3 blocks cached, oldest
  f.run("", range(200, 211));  // 3 blocks cached
  EXPECT_EQ(f.pool.n_free(), 5);
  const Tokens t = range(1, 16);
  Result<SequenceKv> seq = f.cache.admit("", f.cache.match("", t), 16);  // 4 blocks
  ASSERT_TRUE(seq.ok());
  EXPECT_EQ(f.pool.n_free(), 1);
  // Decoding into positions 16..23 needs 2 more blocks: one free, one from evicting the 100s.
  ASSERT_TRUE(f.cache.reserve(*seq, 24).ok());
  EXPECT_EQ(seq->block_table().size(), 6u);
  EXPECT_EQ(seq->n_blocks_allocated(), 6);
  EXPECT_EQ(f.pool.n_evicted(), 3);
  EXPECT_EQ(f.cache.match("", range(100, 111)).n_tokens, 0);
  EXPECT_EQ(f.cache.match("", range(200, 211)).n_tokens, 11);
  // Within the capacity nothing is allocated.
  ASSERT_TRUE(f.cache.reserve(*seq, 20).ok());
  EXPECT_EQ(seq->block_table().size(), 6u);
  f.expect_ok();
}

TEST(PrefixCacheTest, ARequestThatCannotFitIsRefusedWithNothingChanged) {
  Fixture f;
  f.run("", range(100, 111));
  Result<SequenceKv> holder = f.cache.admit("", PrefixMatch{}, 28);  // 7 blocks held
  ASSERT_TRUE(holder.ok());
  EXPECT_EQ(f.pool.n_free(), 1);
  Result<SequenceKv> big = f.cache.admit("", PrefixMatch{}, 20);  // 5 > 1 free + 3 evictable
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message.find("5 blocks needed, 1 free and 3 evictable"), std::string::npos)
      << big.error().message;
  EXPECT_EQ(f.pool.n_evicted(), 0);
  EXPECT_EQ(f.pool.n_free(), 1);
  // Growing past the pool fails the same way and leaves the table as it was.
  Status grow = f.cache.reserve(*holder, 48);
  EXPECT_FALSE(grow.ok());
  EXPECT_EQ(holder->block_table().size(), 7u);
  EXPECT_EQ(f.pool.n_evicted(), 0);
  f.expect_ok();
}

TEST(PrefixCacheTest, TheMatchedPrefixSurvivesEvictionDuringAdmission) {
  Fixture f;
  f.run("", range(1, 12));   // 3 blocks
  f.run("", range(50, 61));  // 3 blocks
  f.run("", range(70, 81));  // 3 blocks, 2 free left
  // Touch the 50s and 70s so that the 1..12 prefix is the least recently used, then admit a
  // request sharing 6 tokens of it that needs 8 fresh blocks: eviction must take the others.
  { SequenceKv s = f.run("", range(50, 61)); }
  { SequenceKv s = f.run("", range(70, 81)); }
  const Tokens t = concat(range(1, 6), range(500, 525));  // 32 tokens: 8 blocks
  const PrefixMatch m = f.cache.match("", t);
  EXPECT_EQ(m.n_tokens, 6);
  Result<SequenceKv> seq = f.cache.admit("", m, 32);
  ASSERT_TRUE(seq.ok()) << seq.error().message;
  EXPECT_EQ(seq->block_table()[0], 0);  // still the cached block 0
  EXPECT_EQ(f.key_at(*seq, 5), 6.0f);   // copied before anything was evicted
  f.expect_ok();
}

TEST(PrefixCacheTest, SequenceKvReleasesOnDestructionAndMove) {
  Fixture f;
  {
    Result<SequenceKv> a = f.cache.admit("", PrefixMatch{}, 8);
    ASSERT_TRUE(a.ok());
    SequenceKv moved = std::move(a).value();
    EXPECT_EQ(f.pool.n_in_use(), 2);
    SequenceKv assigned;
    assigned = std::move(moved);
    EXPECT_TRUE(moved.block_table().empty());  // NOLINT(bugprone-use-after-move): specified
    EXPECT_EQ(f.pool.n_in_use(), 2);
    Result<SequenceKv> b = f.cache.admit("", PrefixMatch{}, 4);
    ASSERT_TRUE(b.ok());
    assigned = std::move(b).value();  // drops the first request's blocks
    EXPECT_EQ(f.pool.n_in_use(), 1);
  }
  EXPECT_EQ(f.pool.n_free(), 11);
  f.expect_ok();
}

TEST(PrefixCacheTest, EveryBlockIsFreeAfterRequestsEndAndAFlush) {
  Fixture f;
  for (int i = 0; i < 20; ++i) {
    const Tokens t = concat(range(1, 1 + i % 7), range(100 * i, 100 * i + i % 5));
    SequenceKv seq = f.run(i % 3 == 0 ? "x" : "", t);
    f.expect_ok();
  }
  EXPECT_GT(f.pool.n_acquired(), 0);
  EXPECT_GT(f.pool.n_evicted(), 0);
  f.cache.flush();
  EXPECT_EQ(f.pool.n_free(), 11);
  EXPECT_EQ(f.cache.tree().n_nodes(), 0);
  f.expect_ok();
}

TEST(PrefixCacheTest, RestoredBlocksAreHeldWhileWrittenThenCachedUnderTheSharedPrefix) {
  Fixture f;
  f.run("", range(1, 8));  // blocks 0 and 1 cached: tokens 1..8
  const Tokens t = range(1, 18);
  const PrefixMatch m = f.cache.match("", t);
  ASSERT_EQ(m.n_full_blocks, 2);
  // Restoring tokens 9..18 (two whole blocks and a partial one) under the two cached blocks.
  Blocks table;
  ASSERT_TRUE(f.cache.hold_for_restore(std::span(m.blocks).first(2), 3, table));
  ASSERT_EQ(table.size(), 5u);
  EXPECT_EQ(table[0], m.blocks[0]);
  EXPECT_EQ(table[1], m.blocks[1]);
  // Held: the fresh blocks are the caller's, and the shared ones cannot be evicted meanwhile.
  EXPECT_EQ(f.pool.n_in_use(), 5);
  EXPECT_EQ(f.cache.flush(), 0);
  EXPECT_EQ(f.pool.n_in_use(), 5);
  // "Written" by someone else, as a disk tier's loader would.
  for (size_t p = 8; p < t.size(); ++p) {
    const auto k = static_cast<float>(t[p]);
    std::memcpy(f.kv.keys(table[p / B], 0, 0) + sizeof(float) * (p % B), &k, sizeof(float));
  }
  EXPECT_EQ(f.cache.install_restored("", t, table, 2), 3);
  f.cache.release_restore(table);
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(f.pool.n_in_use(), 0);
  EXPECT_EQ(f.pool.n_cached_only(), 5);
  // A request finds all of it (but its last token) and reads the restored KV.
  const Tokens longer = range(1, 19);
  const PrefixMatch again = f.cache.match("", longer);
  EXPECT_EQ(again.n_tokens, 18);
  Result<SequenceKv> seq = f.cache.admit("", again, 19);
  ASSERT_TRUE(seq.ok());
  EXPECT_EQ(f.key_at(*seq, 12), 13.0f);
  EXPECT_EQ(f.key_at(*seq, 17), 18.0f);
  seq->reset();
  f.expect_ok();
}

TEST(PrefixCacheTest, ARestoreThePoolCannotHoldTakesNothing) {
  Fixture f;
  const SequenceKv running = f.run("", range(1, 36));  // 9 of the 11 blocks, still held
  Blocks table{7};
  EXPECT_FALSE(f.cache.hold_for_restore({}, 3, table));
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(f.pool.n_in_use(), 9);
  EXPECT_TRUE(f.cache.hold_for_restore({}, 2, table));
  EXPECT_EQ(table.size(), 2u);
  f.cache.release_restore(table);
  EXPECT_EQ(f.pool.n_in_use(), 9);
  f.expect_ok();
}

}  // namespace
}  // namespace trellis
