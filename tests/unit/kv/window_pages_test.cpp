// WindowPages: a held block has a page; a page nobody holds is freed unless the cache indexes its
// block (then it is evictable, and taken back least recently released first); a block that goes
// free takes its page along; reservations never promise more pages than there are.
#include "kv/window_pages.h"

#include <gtest/gtest.h>

#include <vector>

namespace trellis {
namespace {

struct Fixture {
  explicit Fixture(int32_t n_blocks, int32_t n_pages)
      : kv(make_kv(n_blocks, n_pages)), pool(n_blocks), pages(kv, pool) {}
  static KvStorage make_kv(int32_t n_blocks, int32_t n_pages) {
    KvLayout layout{2, 1, 32, 4, KvTypes{}};
    layout.windowed = {1, 0};
    return std::move(KvStorage::create(layout, n_blocks, n_pages).value());
  }
  std::vector<BlockId> alloc(int32_t n) {
    std::vector<BlockId> ids;
    pool.alloc(n, ids);
    return ids;
  }
  void expect_ok() {
    Status ok = pages.check_invariants();
    EXPECT_TRUE(ok.ok()) << (ok.ok() ? "" : ok.error().message);
  }
  KvStorage kv;
  BlockPool pool;
  WindowPages pages;
};

TEST(WindowPages, HoldingAttachesAPageAndLettingGoOfAnUncachedBlockFreesIt) {
  Fixture f(4, 2);
  const std::vector<BlockId> b = f.alloc(2);
  f.pages.hold(b[0]);
  EXPECT_TRUE(f.pages.has_page(b[0]));
  EXPECT_FALSE(f.pages.has_page(b[1]));
  f.pages.hold(b[0]);  // a second request in the same window
  EXPECT_EQ(f.pages.holders(b[0]), 2);
  EXPECT_EQ(f.pages.n_held(), 1);
  f.pages.let_go(b[0]);
  EXPECT_TRUE(f.pages.has_page(b[0]));
  f.pages.let_go(b[0]);
  EXPECT_FALSE(f.pages.has_page(b[0])) << "nobody can read it again: the cache does not index it";
  EXPECT_EQ(f.pages.n_free(), 2);
  f.expect_ok();
}

TEST(WindowPages, ACachedBlocksPageStaysEvictableUntilAHoldNeedsItsPage) {
  Fixture f(4, 2);
  const std::vector<BlockId> b = f.alloc(3);
  for (BlockId id : b) f.pool.cache_retain(id);  // the tree indexes all three
  f.pages.hold(b[0]);
  f.pages.hold(b[1]);
  f.pages.let_go(b[0]);  // released first: evicted first
  f.pages.let_go(b[1]);
  EXPECT_EQ(f.pages.n_evictable(), 2);
  EXPECT_EQ(f.pages.n_free(), 0);
  f.expect_ok();
  f.pages.hold(b[1]);  // held again: no longer evictable
  EXPECT_EQ(f.pages.n_evictable(), 1);
  f.pages.hold(b[2]);  // no free page: the oldest evictable one (b0's) goes
  EXPECT_FALSE(f.pages.has_page(b[0]));
  EXPECT_TRUE(f.pages.has_page(b[2]));
  EXPECT_EQ(f.pages.n_evicted(), 1);
  EXPECT_EQ(f.pages.peak_held(), 2);
  f.expect_ok();
  f.pages.let_go(b[1]);
  f.pages.let_go(b[2]);
  f.pool.release_all(b);
  f.expect_ok();
}

TEST(WindowPages, AFreedBlockTakesItsPageAlong) {
  Fixture f(4, 2);
  const std::vector<BlockId> b = f.alloc(1);
  f.pool.cache_retain(b[0]);
  f.pages.hold(b[0]);
  f.pages.let_go(b[0]);
  ASSERT_EQ(f.pages.n_evictable(), 1);
  f.pool.release(b[0]);  // the request's reference; the tree still holds the block
  EXPECT_TRUE(f.pages.has_page(b[0]));
  EXPECT_TRUE(f.pool.cache_release(b[0]));  // evicted from the tree: the block is free
  EXPECT_FALSE(f.pages.has_page(b[0]));
  EXPECT_EQ(f.pages.n_evictable(), 0);
  EXPECT_EQ(f.pages.n_free(), 2);
  f.expect_ok();
}

TEST(WindowPages, ReservationsNeverExceedThePages) {
  Fixture f(4, 5);
  EXPECT_TRUE(f.pages.try_reserve(3));
  EXPECT_FALSE(f.pages.try_reserve(3));
  EXPECT_EQ(f.pages.n_reserved(), 3);
  EXPECT_TRUE(f.pages.try_reserve(2));
  f.pages.unreserve(5);
  EXPECT_EQ(f.pages.n_reserved(), 0);
  EXPECT_FALSE(f.pages.try_reserve(-1));
}

}  // namespace
}  // namespace trellis
