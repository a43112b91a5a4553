// BlockPool: exact block ids handed out, refcounts of request and tree references, the state
// counts (free / cached-only / in use) and cumulative counters, and pool sizing helpers.
#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <vector>

namespace trellis {
namespace {

void expect_ok(const BlockPool& pool) {
  Status status = pool.check_invariants();
  EXPECT_TRUE(status.ok()) << (status.ok() ? "" : status.error().message);
}

TEST(BlockPoolTest, FreshPoolHandsOutLowestIdsFirst) {
  BlockPool pool(11);
  EXPECT_EQ(pool.n_total(), 11);
  EXPECT_EQ(pool.n_free(), 11);
  std::vector<BlockId> ids;
  ASSERT_TRUE(pool.can_alloc(3));
  pool.alloc(3, ids);
  EXPECT_EQ(ids, (std::vector<BlockId>{0, 1, 2}));
  EXPECT_EQ(pool.refcount(0), 1);
  EXPECT_EQ(pool.n_free(), 8);
  EXPECT_EQ(pool.n_used(), 3);
  EXPECT_EQ(pool.n_in_use(), 3);
  EXPECT_EQ(pool.n_cached(), 0);
  EXPECT_EQ(pool.n_allocated(), 3);
  expect_ok(pool);
}

TEST(BlockPoolTest, ReleasedBlocksAreReusedMostRecentFirst) {
  BlockPool pool(11);
  std::vector<BlockId> ids;
  pool.alloc(4, ids);
  pool.release(1);
  pool.release(3);
  std::vector<BlockId> again;
  pool.alloc(3, again);
  EXPECT_EQ(again, (std::vector<BlockId>{3, 1, 4}));
  EXPECT_EQ(pool.peak_used(), 5);
  EXPECT_EQ(pool.n_allocated(), 7);
  expect_ok(pool);
}

TEST(BlockPoolTest, EachAllocationIsANewGenerationOfTheBlock) {
  BlockPool pool(2);
  std::vector<BlockId> ids;
  pool.alloc(1, ids);
  const uint32_t first = pool.generation(ids[0]);
  pool.retain(ids[0]);  // another holder: the same contents, the same generation
  EXPECT_EQ(pool.generation(ids[0]), first);
  pool.release(ids[0]);
  pool.release(ids[0]);
  EXPECT_EQ(pool.generation(ids[0]), first);  // free, not yet handed out again
  std::vector<BlockId> again;
  pool.alloc(1, again);
  ASSERT_EQ(again[0], ids[0]);
  EXPECT_EQ(pool.generation(again[0]), first + 1);
}

TEST(BlockPoolTest, CanAllocRejectsNegativeAndTooMany) {
  BlockPool pool(2);
  EXPECT_FALSE(pool.can_alloc(-1));
  EXPECT_TRUE(pool.can_alloc(0));
  EXPECT_TRUE(pool.can_alloc(2));
  EXPECT_FALSE(pool.can_alloc(3));
}

TEST(BlockPoolTest, RetainCountsAcquisitionsAndKeepsBlockUntilLastRelease) {
  BlockPool pool(4);
  std::vector<BlockId> ids;
  pool.alloc(1, ids);
  pool.retain(0);
  pool.retain(0);
  EXPECT_EQ(pool.refcount(0), 3);
  EXPECT_EQ(pool.n_acquired(), 2);
  pool.release(0);
  pool.release(0);
  EXPECT_FALSE(pool.is_free(0));
  EXPECT_EQ(pool.n_free(), 3);
  pool.release(0);
  EXPECT_TRUE(pool.is_free(0));
  EXPECT_EQ(pool.n_free(), 4);
  expect_ok(pool);
}

TEST(BlockPoolTest, TreeReferencesMoveBlocksBetweenStates) {
  BlockPool pool(5);
  std::vector<BlockId> ids;
  pool.alloc(2, ids);  // blocks 0, 1 in use by one request
  pool.cache_retain(0);
  EXPECT_EQ(pool.refcount(0), 2);
  EXPECT_EQ(pool.tree_refs(0), 1);
  EXPECT_EQ(pool.request_refs(0), 1);
  EXPECT_EQ(pool.n_cached(), 1);
  EXPECT_EQ(pool.n_cached_only(), 0);
  EXPECT_EQ(pool.n_in_use(), 2);
  expect_ok(pool);

  pool.release_all(ids);  // block 0 stays, cached only; block 1 is free
  EXPECT_EQ(pool.refcount(0), 1);
  EXPECT_TRUE(pool.is_free(1));
  EXPECT_EQ(pool.n_cached_only(), 1);
  EXPECT_EQ(pool.n_in_use(), 0);
  EXPECT_EQ(pool.n_free(), 4);
  expect_ok(pool);

  pool.retain(0);  // a new request acquires the cached block
  EXPECT_EQ(pool.n_cached_only(), 0);
  EXPECT_EQ(pool.n_in_use(), 1);
  EXPECT_FALSE(pool.cache_release(0));  // still held by the request: not freed
  EXPECT_EQ(pool.n_cached(), 0);
  EXPECT_EQ(pool.n_evicted(), 0);
  pool.cache_retain(0);
  pool.release(0);
  EXPECT_TRUE(pool.cache_release(0));
  EXPECT_EQ(pool.n_evicted(), 1);
  EXPECT_EQ(pool.n_free(), 5);
  EXPECT_EQ(pool.peak_used(), 2);
  EXPECT_EQ(pool.peak_in_use(), 2);
  expect_ok(pool);
}

TEST(BlockPoolTest, TwoTreeSlotsOnOneBlock) {
  BlockPool pool(3);
  std::vector<BlockId> ids;
  pool.alloc(1, ids);
  pool.cache_retain(0);
  pool.cache_retain(0);
  pool.release(0);
  EXPECT_EQ(pool.tree_refs(0), 2);
  EXPECT_EQ(pool.n_cached(), 1);
  EXPECT_EQ(pool.n_cached_only(), 1);
  EXPECT_FALSE(pool.cache_release(0));
  EXPECT_TRUE(pool.cache_release(0));
  EXPECT_EQ(pool.n_free(), 3);
  expect_ok(pool);
}

TEST(BlockPoolTest, ParsesByteSizes) {
  EXPECT_EQ(parse_byte_size("1000000").value(), 1000000);
  EXPECT_EQ(parse_byte_size("0").value(), 0);
  EXPECT_EQ(parse_byte_size("17B").value(), 17);
  EXPECT_EQ(parse_byte_size("64KiB").value(), 64 * 1024);
  EXPECT_EQ(parse_byte_size("512MiB").value(), int64_t{512} << 20);
  EXPECT_EQ(parse_byte_size("2GiB").value(), int64_t{2} << 30);
  EXPECT_EQ(parse_byte_size("4611686018427387904").value(), int64_t{1} << 62);  // the largest
  EXPECT_EQ(parse_byte_size("4294967296GiB").value(), int64_t{1} << 62);
  EXPECT_FALSE(parse_byte_size("4611686018427387905").ok());
}

TEST(BlockPoolTest, RejectsBadByteSizesWithMessages) {
  for (const char* bad : {"", "MiB", "-1", "+5", "1.5GiB", "12 MiB", "10KB", "10kib", "3GB", "1x",
                          "99999999999999999999", "4294967297GiB"}) {
    Result<int64_t> r = parse_byte_size(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find("memory size"), std::string::npos) << r.error().message;
  }
  EXPECT_NE(parse_byte_size("10KB").error().message.find("unknown suffix"), std::string::npos);
}

TEST(BlockPoolTest, BlocksFromBudgetAndTokens) {
  EXPECT_EQ(blocks_for_bytes(1000, 100).value(), 10);
  EXPECT_EQ(blocks_for_bytes(1099, 100).value(), 10);
  EXPECT_FALSE(blocks_for_bytes(99, 100).ok());
  EXPECT_FALSE(blocks_for_bytes(int64_t{1} << 40, 1).ok());
  // TinyLlama f16 KV: 22 KiB per token, 32 tokens per block = 704 KiB per block.
  EXPECT_EQ(blocks_for_bytes(parse_byte_size("512MiB").value(), 704 * 1024).value(), 744);
  EXPECT_EQ(blocks_for_tokens(1, 16).value(), 1);
  EXPECT_EQ(blocks_for_tokens(16, 16).value(), 1);
  EXPECT_EQ(blocks_for_tokens(17, 16).value(), 2);
  EXPECT_FALSE(blocks_for_tokens(0, 16).ok());
  EXPECT_FALSE(blocks_for_tokens(-3, 16).ok());
}

}  // namespace
}  // namespace trellis
