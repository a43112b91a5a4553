// RadixTree on tiny pools (block size 4, 11 blocks): exact block ids, refcounts, split results,
// both match modes, the length - 1 cap, namespaces, locks and the exact eviction order.
#include "prefix/radix_tree.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "unit/prefix/prefix_test_support.h"

namespace trellis {
namespace {

using prefix_test::admit;
using prefix_test::concat;
using prefix_test::expect_ok;
using prefix_test::finish;
using prefix_test::range;
using prefix_test::Request;
using prefix_test::run_request;
using Tokens = std::vector<TokenId>;
using Blocks = std::vector<BlockId>;

constexpr RadixTreeConfig kToken{4, MatchMode::TOKEN};
constexpr RadixTreeConfig kBlock{4, MatchMode::BLOCK};

// Records the nodes that evict() removes, as "[start,end) first-token blocks ... freed n".
struct EvictionLog {
  std::vector<std::string> entries;
  EvictObserver observer() {
    return [this](const EvictedNode& e) {
      std::string entry(e.ns);
      entry += '[';
      entry += std::to_string(e.start);
      entry += ',';
      entry += std::to_string(e.path.size());
      entry += ") ";
      entry += std::to_string(e.path[static_cast<size_t>(e.start)]);
      entry += " blocks";
      for (BlockId b : e.blocks) {
        entry += ' ';
        entry += std::to_string(b);
      }
      entry += " freed ";
      entry += std::to_string(e.n_blocks_freed);
      entries.push_back(entry);
    };
  }
};

TEST(RadixTreeTest, InsertThenMatchReportsExactBlocks) {
  BlockPool pool(11);
  RadixTree tree(pool, kToken);
  const Tokens t = range(1, 10);
  Blocks table;
  pool.alloc(3, table);  // 0, 1, 2
  InsertResult r = tree.insert("", t, table);
  EXPECT_EQ(r.n_taken, 3);
  EXPECT_EQ(r.n_not_taken, 0);
  EXPECT_EQ(pool.refcount(0), 2);
  pool.release_all(table);
  EXPECT_EQ(pool.refcount(0), 1);
  EXPECT_EQ(pool.refcount(2), 1);
  EXPECT_EQ(pool.n_cached_only(), 3);
  EXPECT_EQ(pool.n_free(), 8);
  EXPECT_EQ(tree.debug_string(), "ns \"\":\n  [0,10) 1,2,3,4,5,6,7,8,9,10 blocks=0,1 tail=2\n");
  expect_ok(tree);

  // The usual cap (length - 1) leaves one token in the partial block.
  PrefixMatch m = tree.match_prefix("", t, 9);
  EXPECT_EQ(m.n_tokens, 9);
  EXPECT_EQ(m.n_full_blocks, 2);
  EXPECT_EQ(m.n_partial_slots, 1);
  EXPECT_EQ(m.blocks, (Blocks{0, 1, 2}));
  EXPECT_EQ(m.partial_block(), 2);
  EXPECT_NE(m.node, nullptr);

  m = tree.match_prefix("", t, 10);
  EXPECT_EQ(m.n_tokens, 10);
  EXPECT_EQ(m.n_partial_slots, 2);
  EXPECT_EQ(m.blocks, (Blocks{0, 1, 2}));

  m = tree.match_prefix("", t, 8);
  EXPECT_EQ(m.n_tokens, 8);
  EXPECT_FALSE(m.has_partial_block());
  EXPECT_EQ(m.blocks, (Blocks{0, 1}));

  m = tree.match_prefix("", t, 5);
  EXPECT_EQ(m.blocks, (Blocks{0, 1}));
  EXPECT_EQ(m.n_partial_slots, 1);

  // A prompt diverging at position 6 reuses 6 tokens: one whole block and 2 slots of block 1.
  m = tree.match_prefix("", concat(range(1, 6), {99, 98, 97}), 8);
  EXPECT_EQ(m.n_tokens, 6);
  EXPECT_EQ(m.blocks, (Blocks{0, 1}));
  EXPECT_EQ(m.n_partial_slots, 2);

  for (int32_t cap : {0, -1}) {
    m = tree.match_prefix("", t, cap);
    EXPECT_EQ(m.n_tokens, 0);
    EXPECT_TRUE(m.blocks.empty());
    EXPECT_EQ(m.node, nullptr);
  }
  EXPECT_EQ(tree.match_prefix("", Tokens{2, 3}, 1).n_tokens, 0);
  EXPECT_EQ(tree.match_prefix("", Tokens{}, 5).n_tokens, 0);
  expect_ok(tree);
}

TEST(RadixTreeTest, BlockModeSharesWholeBlocksOnly) {
  BlockPool pool(11);
  RadixTree tree(pool, kBlock);
  const Tokens t = range(1, 10);
  Blocks table;
  pool.alloc(3, table);
  InsertResult r = tree.insert("", t, table);
  EXPECT_EQ(r.n_taken, 2);  // the partial last block is not cached
  EXPECT_EQ(r.n_not_taken, 1);
  pool.release_all(table);
  EXPECT_TRUE(pool.is_free(2));
  EXPECT_EQ(tree.debug_string(), "ns \"\":\n  [0,8) 1,2,3,4,5,6,7,8 blocks=0,1\n");

  PrefixMatch m = tree.match_prefix("", t, 9);
  EXPECT_EQ(m.n_tokens, 8);
  EXPECT_EQ(m.blocks, (Blocks{0, 1}));
  EXPECT_FALSE(m.has_partial_block());
  // Diverging inside block 1 recomputes all of it.
  m = tree.match_prefix("", concat(range(1, 6), {99, 98, 97}), 8);
  EXPECT_EQ(m.n_tokens, 4);
  EXPECT_EQ(m.blocks, (Blocks{0}));
  // The length - 1 cap rounds down too.
  m = tree.match_prefix("", range(1, 8), 7);
  EXPECT_EQ(m.n_tokens, 4);
  EXPECT_EQ(tree.match_prefix("", range(1, 3), 2).n_tokens, 0);

  Blocks short_table;
  pool.alloc(1, short_table);
  r = tree.insert("", Tokens{7, 7, 7}, short_table);
  EXPECT_EQ(r.n_taken, 0);
  EXPECT_EQ(r.n_not_taken, 1);
  pool.release_all(short_table);
  expect_ok(tree);
}

TEST(RadixTreeTest, SplitInsideABlockSharesTheStraddlingBlockAsTail) {
  BlockPool pool(11);
  RadixTree tree(pool, kToken);
  run_request(tree, pool, "", range(1, 8));  // blocks 0, 1
  EXPECT_EQ(tree.debug_string(), "ns \"\":\n  [0,8) 1,2,3,4,5,6,7,8 blocks=0,1\n");

  // Shares 6 tokens: block 0 whole, 2 slots of block 1 copied into fresh block 2.
  const Tokens other = concat(range(1, 6), {70, 80});
  Request req;
  ASSERT_TRUE(admit(tree, pool, "", other, req));
  EXPECT_EQ(req.match.n_tokens, 6);
  EXPECT_EQ(req.match.blocks, (Blocks{0, 1}));
  EXPECT_EQ(req.table, (Blocks{0, 2}));
  EXPECT_EQ(pool.refcount(0), 2);
  // Locking the match split [0,8) at 6: block 1 is the head's tail and the child's full block.
  EXPECT_EQ(pool.refcount(1), 2);
  EXPECT_EQ(pool.tree_refs(1), 2);
  InsertResult r = finish(tree, pool, "", other, req);
  EXPECT_EQ(r.n_taken, 1);
  EXPECT_EQ(r.n_not_taken, 1);
  EXPECT_EQ(tree.debug_string(),
            "ns \"\":\n"
            "  [0,6) 1,2,3,4,5,6 blocks=0 tail=1\n"
            "    [6,8) 7,8 blocks=1\n"
            "    [6,8) 70,80 blocks=2\n");
  EXPECT_EQ(pool.refcount(0), 1);
  EXPECT_EQ(pool.tree_refs(1), 2);  // the child's block and the new parent's tail
  EXPECT_EQ(pool.refcount(1), 2);
  EXPECT_EQ(pool.refcount(2), 1);
  EXPECT_EQ(pool.n_cached(), 3);
  EXPECT_EQ(pool.n_cached_only(), 3);
  EXPECT_EQ(tree.n_nodes(), 3);
  expect_ok(tree);

  // A match ending in the parent takes the partial block from the parent's tail.
  PrefixMatch m = tree.match_prefix("", concat(range(1, 5), {0}), 5);
  EXPECT_EQ(m.blocks, (Blocks{0, 1}));
  EXPECT_EQ(m.n_partial_slots, 1);
  m = tree.match_prefix("", concat(other, {9}), 8);
  EXPECT_EQ(m.blocks, (Blocks{0, 2}));
  EXPECT_EQ(m.n_tokens, 8);

  // Evicting the child keeps the shared block for the parent's tail.
  EvictionLog log;
  EXPECT_EQ(tree.evict(1, log.observer()), 1);
  EXPECT_EQ(log.entries,
            (std::vector<std::string>{"[6,8) 7 blocks 1 freed 0", "[6,8) 70 blocks 2 freed 1"}));
  EXPECT_EQ(pool.tree_refs(1), 1);
  EXPECT_TRUE(pool.is_free(2));
  m = tree.match_prefix("", range(1, 8), 7);
  EXPECT_EQ(m.n_tokens, 6);
  EXPECT_EQ(m.blocks, (Blocks{0, 1}));
  expect_ok(tree);
}

TEST(RadixTreeTest, SplitAtABlockBoundaryNeedsNoTail) {
  BlockPool pool(11);
  RadixTree tree(pool, kToken);
  run_request(tree, pool, "", range(1, 8));
  run_request(tree, pool, "", concat(range(1, 4), {9, 9, 9, 9}));
  EXPECT_EQ(tree.debug_string(),
            "ns \"\":\n"
            "  [0,4) 1,2,3,4 blocks=0\n"
            "    [4,8) 5,6,7,8 blocks=1\n"
            "    [4,8) 9,9,9,9 blocks=2\n");
  expect_ok(tree);
}

TEST(RadixTreeTest, SplitTwiceInsideOneBlock) {
  BlockPool pool(11);
  RadixTree tree(pool, kToken);
  run_request(tree, pool, "", range(1, 8));                    // blocks 0, 1
  run_request(tree, pool, "", concat(range(1, 6), {50, 50}));  // split at 6, block 2
  run_request(tree, pool, "", concat(range(1, 5), {60, 60}));  // split at 5, block 3
  EXPECT_EQ(tree.debug_string(),
            "ns \"\":\n"
            "  [0,5) 1,2,3,4,5 blocks=0 tail=1\n"
            "    [5,6) 6 tail=1\n"
            "      [6,8) 7,8 blocks=1\n"
            "      [6,8) 50,50 blocks=2\n"
            "    [5,7) 60,60 tail=3\n");
  EXPECT_EQ(pool.tree_refs(1), 3);
  EXPECT_EQ(tree.count_evictable_blocks(), 4);
  expect_ok(tree);
  EXPECT_EQ(tree.flush(), 4);
  EXPECT_EQ(pool.n_free(), 11);
  EXPECT_EQ(tree.n_nodes(), 0);
  expect_ok(tree);
}

TEST(RadixTreeTest, InsertingACachedSequenceAgainTakesNothing) {
  BlockPool pool(11);
  RadixTree tree(pool, kToken);
  const Tokens t = range(1, 6);
  // Two requests compute the same prompt side by side; the second one's blocks are duplicates.
  Request a;
  Request b;
  ASSERT_TRUE(admit(tree, pool, "", t, a));
  ASSERT_TRUE(admit(tree, pool, "", t, b));
  EXPECT_EQ(a.table, (Blocks{0, 1}));
  EXPECT_EQ(b.table, (Blocks{2, 3}));
  InsertResult ra = finish(tree, pool, "", t, a);
  InsertResult rb = finish(tree, pool, "", t, b);
  EXPECT_EQ(ra.n_taken, 2);
  EXPECT_EQ(rb.n_taken, 0);
  EXPECT_EQ(rb.n_not_taken, 2);
  EXPECT_TRUE(pool.is_free(2));
  EXPECT_TRUE(pool.is_free(3));
  EXPECT_EQ(pool.n_free(), 9);

  // A shorter prefix of what is cached takes nothing and splits nothing.
  Blocks table;
  pool.alloc(1, table);
  InsertResult r = tree.insert("", range(1, 3), table);
  EXPECT_EQ(r.n_taken, 0);
  pool.release_all(table);
  EXPECT_EQ(tree.n_nodes(), 1);
  expect_ok(tree);
}

TEST(RadixTreeTest, ExtendingACachedPartialBlockCopiesIt) {
  BlockPool pool(11);
  RadixTree tree(pool, kToken);
  run_request(tree, pool, "", range(1, 6));  // block 0, tail 1 (2 slots)
  const Tokens longer = range(1, 10);
  Request req;
  ASSERT_TRUE(admit(tree, pool, "", longer, req));
  EXPECT_EQ(req.match.n_tokens, 6);
  EXPECT_EQ(req.match.partial_block(), 1);
  EXPECT_EQ(req.match.n_partial_slots, 2);
  EXPECT_EQ(req.table, (Blocks{0, 2, 3}));  // block 2 receives slots [0, 2) of block 1
  EXPECT_EQ(pool.n_acquired(), 1);
  InsertResult r = finish(tree, pool, "", longer, req);
  EXPECT_EQ(r.n_taken, 2);
  EXPECT_EQ(tree.debug_string(),
            "ns \"\":\n"
            "  [0,6) 1,2,3,4,5,6 blocks=0 tail=1\n"
            "    [6,10) 7,8,9,10 blocks=2 tail=3\n");
  PrefixMatch m = tree.match_prefix("", longer, 9);
  EXPECT_EQ(m.blocks, (Blocks{0, 2, 3}));
  EXPECT_EQ(pool.n_allocated(), 4);
  expect_ok(tree);
}

TEST(RadixTreeTest, EvictsLeastRecentlyUsedLeavesThenParentsInExactOrder) {
  BlockPool pool(11);
  RadixTree tree(pool, kToken);
  run_request(tree, pool, "", range(1, 8));
  run_request(tree, pool, "", concat(range(1, 4), {9, 9, 9, 9}));  // split at 4
  run_request(tree, pool, "", Tokens{7, 7, 7, 7});
  run_request(tree, pool, "", Tokens{30, 31, 32, 33});
  // Touch [30..33] so that [7,7,7,7] is now the oldest of the two single-node sequences. The
  // lock pins only the 3 matched tokens: [30..33] is split at 3, and block 4 becomes the tail of
  // [0,3) as well as the full block of [3,4).
  tree.lock(tree.match_prefix("", Tokens{30, 31, 32, 33}, 3)).reset();
  expect_ok(tree);
  EXPECT_EQ(tree.n_evictable_leaves(), 4);
  EXPECT_EQ(tree.count_evictable_blocks(), 5);

  EvictionLog log;
  EXPECT_EQ(tree.evict(1, log.observer()), 1);  // the 5..8 leaf: last touched by a lock
  EXPECT_EQ(tree.evict(2, log.observer()), 2);  // the 9s leaf, then its parent, now a leaf
  EXPECT_EQ(tree.evict(1, log.observer()), 1);
  EXPECT_EQ(tree.evict(1, log.observer()), 1);
  EXPECT_EQ(tree.evict(1, log.observer()), 0);
  EXPECT_EQ(log.entries, (std::vector<std::string>{
                             "[4,8) 5 blocks 1 freed 1",
                             "[4,8) 9 blocks 2 freed 1",
                             "[0,4) 1 blocks 0 freed 1",
                             "[0,4) 7 blocks 3 freed 1",
                             "[3,4) 33 blocks 4 freed 0",
                             "[0,3) 30 blocks 4 freed 1",
                         }));
  EXPECT_EQ(pool.n_free(), 11);
  EXPECT_EQ(pool.n_evicted(), 5);
  expect_ok(tree);
}

TEST(RadixTreeTest, LeafCountFollowsInsertSplitAndEvict) {
  BlockPool pool(11);
  RadixTree tree(pool, kToken);
  EXPECT_EQ(tree.n_leaves(), 0);
  run_request(tree, pool, "", range(1, 8));
  EXPECT_EQ(tree.n_leaves(), 1);
  run_request(tree, pool, "", range(1, 10));  // extends the leaf: still one
  EXPECT_EQ(tree.n_nodes(), 2);
  EXPECT_EQ(tree.n_leaves(), 1);
  run_request(tree, pool, "", concat(range(1, 5), {9, 9}));  // split at 5 inside block 1
  EXPECT_EQ(tree.n_nodes(), 4);
  EXPECT_EQ(tree.n_leaves(), 2);
  run_request(tree, pool, "a", Tokens{7, 7, 7});  // another namespace: its own leaf
  EXPECT_EQ(tree.n_leaves(), 3);
  // Locking a match that ends inside an edge splits it: no new leaf.
  tree.lock(tree.match_prefix("", range(1, 10), 2)).reset();
  EXPECT_EQ(tree.n_leaves(), 3);
  expect_ok(tree);

  EvictionLog log;
  EXPECT_EQ(tree.evict(1, log.observer()), 1);  // the oldest leaf: [8,10)
  EXPECT_EQ(log.entries, (std::vector<std::string>{"[8,10) 9 blocks 2 freed 1"}));
  EXPECT_EQ(tree.n_leaves(), 3);  // its parent [5,8) became a leaf in its place
  expect_ok(tree);
  tree.flush();
  EXPECT_EQ(tree.n_leaves(), 0);
  EXPECT_EQ(tree.n_nodes(), 0);
  expect_ok(tree);
}

TEST(RadixTreeTest, EvictionOrderTieBreaks) {
  LeafKeyLess less;
  // Older first.
  EXPECT_TRUE(less(LeafKey{1, 4, 9}, LeafKey{2, 8, 0}));
  // Same clock: deeper first.
  EXPECT_TRUE(less(LeafKey{3, 8, 9}, LeafKey{3, 4, 0}));
  EXPECT_FALSE(less(LeafKey{3, 4, 0}, LeafKey{3, 8, 9}));
  // Same clock and depth: created earlier first.
  EXPECT_TRUE(less(LeafKey{3, 4, 1}, LeafKey{3, 4, 2}));
  EXPECT_FALSE(less(LeafKey{3, 4, 2}, LeafKey{3, 4, 2}));
}

TEST(RadixTreeTest, EvictionStopsWhenEnoughIsFreeAndCountsWholeNodes) {
  BlockPool pool(11);
  RadixTree tree(pool, kToken);
  run_request(tree, pool, "", range(1, 12));   // 3 blocks
  run_request(tree, pool, "", range(20, 23));  // 1 block
  EvictionLog log;
  EXPECT_EQ(tree.evict(1, log.observer()), 3);  // the oldest node frees all its blocks
  EXPECT_EQ(log.entries, (std::vector<std::string>{"[0,12) 1 blocks 0 1 2 freed 3"}));
  EXPECT_EQ(tree.evict(0), 0);
  EXPECT_EQ(tree.n_nodes(), 1);
  expect_ok(tree);
}

TEST(RadixTreeTest, LockedPathsAreNeverEvicted) {
  BlockPool pool(11);
  RadixTree tree(pool, kToken);
  run_request(tree, pool, "", range(1, 8));
  run_request(tree, pool, "", concat(range(1, 4), {9, 9, 9, 9}));
  run_request(tree, pool, "", Tokens{7, 7, 7, 7});

  // Lock 7 tokens of the 9s leaf (oldest would be the 5..8 leaf): the leaf is split at 7 and
  // the matched half and its parent are pinned. The unmatched [7,8) stays evictable, but its
  // block 2 is also the locked half's tail, so evicting it frees nothing.
  PrefixLock lock = tree.lock(tree.match_prefix("", concat(range(1, 4), {9, 9, 9, 9}), 7));
  EXPECT_TRUE(lock.locked());
  EXPECT_EQ(tree.debug_string(),
            "ns \"\":\n"
            "  [0,4) 1,2,3,4 blocks=0 lock=1\n"
            "    [4,8) 5,6,7,8 blocks=1\n"
            "    [4,7) 9,9,9 tail=2 lock=1\n"
            "      [7,8) 9 blocks=2\n"
            "  [0,4) 7,7,7,7 blocks=3\n");
  EXPECT_EQ(tree.count_evictable_blocks(), 2);
  EvictionLog log;
  EXPECT_EQ(tree.flush(log.observer()), 2);
  EXPECT_EQ(log.entries,
            (std::vector<std::string>{"[4,8) 5 blocks 1 freed 1", "[7,8) 9 blocks 2 freed 0",
                                      "[0,4) 7 blocks 3 freed 1"}));
  EXPECT_EQ(tree.n_nodes(), 2);
  expect_ok(tree);

  // Moving the lock keeps it; resetting the moved-to lock releases the path.
  PrefixLock moved = std::move(lock);
  EXPECT_FALSE(lock.locked());  // NOLINT(bugprone-use-after-move): moved-from state is specified
  PrefixLock assigned;
  assigned = std::move(moved);
  EXPECT_EQ(tree.flush(), 0);
  assigned.reset();
  EXPECT_FALSE(assigned.locked());
  EXPECT_EQ(tree.flush(), 2);
  EXPECT_EQ(pool.n_free(), 11);
  expect_ok(tree);
}

TEST(RadixTreeTest, TwoLocksOnOnePathCount) {
  BlockPool pool(11);
  RadixTree tree(pool, kToken);
  run_request(tree, pool, "", range(1, 8));
  PrefixLock a = tree.lock(tree.match_prefix("", range(1, 8), 7));
  PrefixLock b = tree.lock(tree.match_prefix("", range(1, 8), 3));
  // Each lock pins exactly its match: [0,8) is split at 7, then at 3.
  EXPECT_EQ(tree.debug_string(),
            "ns \"\":\n"
            "  [0,3) 1,2,3 tail=0 lock=2\n"
            "    [3,7) 4,5,6,7 blocks=0 tail=1 lock=1\n"
            "      [7,8) 8 blocks=1\n");
  EXPECT_EQ(tree.flush(), 0);  // [7,8)'s block 1 is [3,7)'s locked tail too
  a.reset();
  EXPECT_EQ(tree.flush(), 1);  // block 1; block 0 is still [0,3)'s locked tail
  EXPECT_EQ(tree.debug_string(), "ns \"\":\n  [0,3) 1,2,3 tail=0 lock=1\n");
  b.reset();
  EXPECT_EQ(tree.flush(), 1);
  EXPECT_EQ(pool.n_free(), 11);
  expect_ok(tree);
}

TEST(RadixTreeTest, LockingAPathSharesAncestorTailsWithTheChildOnIt) {
  BlockPool pool(11);
  RadixTree tree(pool, kToken);
  run_request(tree, pool, "", range(1, 6));  // [0,6): block 0, tail 1
  run_request(tree, pool, "", range(1, 9));  // extends it: its own copy of block index 1
  EXPECT_EQ(tree.debug_string(),
            "ns \"\":\n"
            "  [0,6) 1,2,3,4,5,6 blocks=0 tail=1\n"
            "    [6,9) 7,8,9 blocks=2 tail=3\n");
  // A request through the child pins [0,6) too; that node's tail becomes the child's block 2
  // (the same tokens' KV), so the lock pins no block the request does not use. Block 1 is freed
  // as a duplicate, not counted as an eviction.
  Request req;
  ASSERT_TRUE(admit(tree, pool, "", concat(range(1, 9), {50}), req));
  EXPECT_EQ(req.match.n_tokens, 9);
  EXPECT_EQ(tree.debug_string(),
            "ns \"\":\n"
            "  [0,6) 1,2,3,4,5,6 blocks=0 tail=2 lock=1\n"
            "    [6,9) 7,8,9 blocks=2 tail=3 lock=1\n");
  EXPECT_EQ(pool.tree_refs(1), 0);
  EXPECT_EQ(req.table, (Blocks{0, 2, 1}));  // block 1 went back to the pool, reused at once
  EXPECT_EQ(pool.tree_refs(2), 2);
  EXPECT_EQ(pool.n_evicted(), 0);
  expect_ok(tree);
  // A match ending inside [0,6) now copies from block 2.
  EXPECT_EQ(tree.match_prefix("", concat(range(1, 6), {60}), 6).partial_block(), 2);
  finish(tree, pool, "", concat(range(1, 9), {50}), req);
  expect_ok(tree);
}

TEST(RadixTreeTest, LeavesWhoseBlocksARequestHoldsAreSkipped) {
  BlockPool pool(11);
  RadixTree tree(pool, kToken);
  run_request(tree, pool, "", range(1, 4));    // block 0, oldest
  run_request(tree, pool, "", range(20, 23));  // block 1
  pool.retain(0);                              // a request holds block 0 without a lock
  EXPECT_EQ(tree.count_evictable_blocks(), 1);
  EvictionLog log;
  EXPECT_EQ(tree.evict(2, log.observer()), 1);
  EXPECT_EQ(log.entries, (std::vector<std::string>{"[0,4) 20 blocks 1 freed 1"}));
  pool.release(0);
  EXPECT_EQ(tree.evict(1, log.observer()), 1);
  EXPECT_EQ(pool.n_free(), 11);
  expect_ok(tree);
}

TEST(RadixTreeTest, NamespacesNeverShare) {
  BlockPool pool(11);
  RadixTree tree(pool, kToken);
  const Tokens t = range(1, 8);
  run_request(tree, pool, "", t);          // blocks 0, 1
  run_request(tree, pool, "tenant-a", t);  // blocks 2, 3: nothing shared with ""
  EXPECT_EQ(pool.n_acquired(), 0);
  EXPECT_EQ(tree.match_prefix("", t, 7).blocks, (Blocks{0, 1}));
  EXPECT_EQ(tree.match_prefix("tenant-a", t, 7).blocks, (Blocks{2, 3}));
  EXPECT_EQ(tree.match_prefix("tenant-b", t, 7).n_tokens, 0);
  EXPECT_EQ(tree.debug_string(),
            "ns \"\":\n"
            "  [0,8) 1,2,3,4,5,6,7,8 blocks=0,1\n"
            "ns \"tenant-a\":\n"
            "  [0,8) 1,2,3,4,5,6,7,8 blocks=2,3\n");
  // Eviction is global across namespaces, oldest first.
  EvictionLog log;
  EXPECT_EQ(tree.evict(1, log.observer()), 2);
  EXPECT_EQ(log.entries, (std::vector<std::string>{"[0,8) 1 blocks 0 1 freed 2"}));
  EXPECT_EQ(tree.match_prefix("", t, 7).n_tokens, 0);
  EXPECT_EQ(tree.match_prefix("tenant-a", t, 7).n_tokens, 7);
  EXPECT_EQ(tree.n_namespaces(), 1);  // the emptied namespace's root is gone
  EXPECT_EQ(tree.debug_string(), "ns \"tenant-a\":\n  [0,8) 1,2,3,4,5,6,7,8 blocks=2,3\n");
  run_request(tree, pool, "", t);  // and comes back on the next insert
  EXPECT_EQ(tree.n_namespaces(), 2);
  expect_ok(tree);
}

TEST(RadixTreeTest, AdmissionEvictsWhatItNeedsAndCountersAddUp) {
  BlockPool pool(11);
  RadixTree tree(pool, kToken);
  // Fill the pool with cached blocks: 2 + 3 + 3 + 3.
  run_request(tree, pool, "", range(100, 107));
  run_request(tree, pool, "", range(200, 211));
  run_request(tree, pool, "", range(300, 311));
  run_request(tree, pool, "", range(400, 411));
  EXPECT_EQ(pool.n_free(), 0);
  EXPECT_EQ(pool.n_cached_only(), 11);
  // A request sharing the first 8 tokens of the 300s needs 2 blocks more: it evicts the oldest
  // (100s, 2 blocks) and keeps its own prefix pinned.
  Request req;
  const Tokens t = concat(range(300, 307), {1, 2, 3, 4, 5});
  ASSERT_TRUE(admit(tree, pool, "", t, req));
  EXPECT_EQ(req.match.n_tokens, 8);
  EXPECT_EQ(req.table, (Blocks{5, 6, 1, 0}));
  EXPECT_EQ(pool.n_evicted(), 2);
  EXPECT_EQ(pool.n_acquired(), 2);
  EXPECT_EQ(pool.n_in_use(), 4);
  EXPECT_EQ(pool.n_cached_only(), 7);
  EXPECT_EQ(pool.n_free(), 0);
  expect_ok(tree);
  // A request needing more than can ever be freed is refused with nothing changed. Evictable:
  // the 200s and 400s (3 blocks each) and the 300s' unmatched last block (the lock split the
  // 300s at 8 and pins only [0,8)).
  Request big;
  EXPECT_EQ(tree.count_evictable_blocks(), 7);
  EXPECT_FALSE(admit(tree, pool, "", range(500, 550), big));
  EXPECT_TRUE(big.table.empty());
  EXPECT_FALSE(big.lock.locked());
  EXPECT_EQ(pool.n_evicted(), 2);
  EXPECT_EQ(pool.n_cached_only(), 7);
  expect_ok(tree);
  finish(tree, pool, "", t, req);
  EXPECT_EQ(pool.n_allocated(), 13);
  EXPECT_EQ(pool.peak_used(), 11);
  // Leak check: with every request gone, a flush frees every block.
  tree.flush();
  EXPECT_EQ(pool.n_free(), 11);
  EXPECT_EQ(pool.n_cached(), 0);
  expect_ok(tree);
}

TEST(RadixTreeTest, DestroyingTheTreeDropsItsReferences) {
  BlockPool pool(11);
  {
    RadixTree tree(pool, kToken);
    run_request(tree, pool, "", range(1, 10));
    EXPECT_EQ(pool.n_free(), 8);
  }
  EXPECT_EQ(pool.n_free(), 11);
  Status status = pool.check_invariants();
  EXPECT_TRUE(status.ok());
}

}  // namespace
}  // namespace trellis

namespace trellis {
namespace {

Tokens continuation(const RadixTree& tree, std::string_view ns, const Tokens& tokens,
                    int32_t max_tokens) {
  Tokens out{99, 99};  // stale contents are replaced
  tree.continuation(ns, tokens, max_tokens, out);
  return out;
}

// What follows a cached context: the rest of its edge, then the most recently used branch.
TEST(RadixTreeContinuationTest, TheMostRecentlyUsedBranchFollowsTheContext) {
  BlockPool pool(64);
  RadixTree tree(pool, kToken);
  const Tokens a = range(1, 10);
  const Tokens b = concat(range(1, 5), range(20, 24));
  run_request(tree, pool, "", a);
  run_request(tree, pool, "", b);  // later: its branch is the most recent
  EXPECT_EQ(continuation(tree, "", range(1, 3), 100), concat(Tokens{4, 5}, range(20, 24)));
  EXPECT_EQ(continuation(tree, "", range(1, 5), 100), range(20, 24));  // ends at the fork
  run_request(tree, pool, "", a);                                      // a is the most recent again
  EXPECT_EQ(continuation(tree, "", range(1, 3), 100), range(4, 10));
  EXPECT_EQ(continuation(tree, "", range(1, 3), 3), range(4, 6));
  EXPECT_EQ(continuation(tree, "", Tokens{}, 2), range(1, 2));
  // Nothing follows: a context not wholly cached, a whole cached path, another namespace, a
  // budget of nothing.
  EXPECT_TRUE(continuation(tree, "", Tokens{1, 2, 99}, 8).empty());
  EXPECT_TRUE(continuation(tree, "", Tokens{7}, 8).empty());
  EXPECT_TRUE(continuation(tree, "", a, 8).empty());
  EXPECT_TRUE(continuation(tree, "other", range(1, 3), 8).empty());
  EXPECT_TRUE(continuation(tree, "", range(1, 3), 0).empty());
  expect_ok(tree);
}

}  // namespace
}  // namespace trellis
