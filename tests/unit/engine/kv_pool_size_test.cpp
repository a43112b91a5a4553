// size_kv_pool: how a budget is shared between the blocks and, with windowed layers, the window
// pages: every running request's window when the budget allows, never so many that the blocks
// cannot hold a context, never fewer than one request's.
#include <gtest/gtest.h>

#include "engine/model_runtime.h"

namespace trellis {
namespace {

// Gemma-3-1B's KV: 26 layers of one 256-wide head, 22 of them windowed; blocks of 32.
KvLayout gemma3_1b_layout() {
  KvLayout layout{26, 1, 256, 32, KvTypes{}};
  for (int64_t il = 0; il < 26; ++il) layout.windowed.push_back(il % 6 < 5 ? 1 : 0);
  return layout;
}

TEST(KvPoolSize, WithoutALimitEveryRequestGetsItsWindowsPages) {
  const Result<KvPoolSize> size = size_kv_pool(gemma3_1b_layout(), 32768, 0, 0, {26, 16});
  ASSERT_TRUE(size.ok()) << size.error().message;
  EXPECT_EQ(size->n_pages, 26 * 16);
  EXPECT_EQ(size->n_ctx, 32768);
}

TEST(KvPoolSize, ABudgetKeepsAContextInTheBlocksAndPagesForOneRequestAtLeast) {
  const KvLayout layout = gemma3_1b_layout();
  // 160 MiB: a 32k context's blocks of the 4 global layers (1025 x 128 KiB) and 46 pages of
  // 704 KiB (the 22 windowed layers), fewer than 16 requests' 416.
  const Result<KvPoolSize> size =
      size_kv_pool(layout, 32768, int64_t{160} << 20, 0, WindowPageNeed{26, 16});
  ASSERT_TRUE(size.ok()) << size.error().message;
  EXPECT_EQ(layout.bytes_per_block(), 128u << 10);
  EXPECT_EQ(layout.bytes_per_page(), 704u << 10);
  EXPECT_EQ(size->n_pages, 46);
  EXPECT_EQ(size->n_ctx, 32768);
  EXPECT_LE(size->n_blocks * layout.bytes_per_block() + size->n_pages * layout.bytes_per_page(),
            size_t{160} << 20);
  // Without windows the same budget holds a context of 6k.
  KvLayout whole = layout;
  whole.windowed.clear();
  const Result<KvPoolSize> full = size_kv_pool(whole, 32768, int64_t{160} << 20, 0);
  ASSERT_TRUE(full.ok());
  EXPECT_LT(full->n_ctx, 6400);
  // A budget too small for a context still gives one request its window's pages.
  const Result<KvPoolSize> tight =
      size_kv_pool(layout, 32768, int64_t{64} << 20, 0, WindowPageNeed{26, 16});
  ASSERT_TRUE(tight.ok());
  EXPECT_EQ(tight->n_pages, 26);
  EXPECT_LT(tight->n_ctx, 32768);
}

}  // namespace
}  // namespace trellis
