// The shared n-gram pool: what followed each n-gram last time, within a bounded size.
#include "spec/ngram_pool.h"

#include <gtest/gtest.h>

#include <vector>

namespace trellis {
namespace {

using Tokens = std::vector<TokenId>;

Tokens draft(NgramPool& pool, const Tokens& history, int32_t max_tokens) {
  Tokens out{99, 99};  // stale contents are replaced
  pool.draft(history, max_tokens, out);
  return out;
}

TEST(NgramPoolTest, DraftsWhatFollowedTheLastNTokensInAnEarlierRequest) {
  NgramPool pool(NgramPoolConfig{3, 4, 100});
  pool.add(Tokens{1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_EQ(draft(pool, Tokens{9, 9, 1, 2, 3}, 8), (Tokens{4, 5, 6, 7}));  // 4 kept at most
  EXPECT_EQ(draft(pool, Tokens{4, 5, 6}, 8), (Tokens{7, 8}));              // the request's end
  EXPECT_EQ(draft(pool, Tokens{1, 2, 3}, 2), (Tokens{4, 5}));
  EXPECT_TRUE(draft(pool, Tokens{6, 7, 8}, 8).empty());  // nothing followed it
  EXPECT_TRUE(draft(pool, Tokens{2, 3}, 8).empty());     // shorter than n
  EXPECT_TRUE(draft(pool, Tokens{3, 2, 1}, 8).empty());
  // A later occurrence replaces the continuation.
  pool.add(Tokens{1, 2, 3, 40, 50});
  EXPECT_EQ(draft(pool, Tokens{1, 2, 3}, 8), (Tokens{40, 50}));
  EXPECT_EQ(pool.size(), 5 + 1);  // 1-2-3 .. 5-6-7 from the first, 2-3-40 new (3-40-50 ends it)
}

TEST(NgramPoolTest, TheLeastRecentlyUsedGoesWhenFull) {
  NgramPool pool(NgramPoolConfig{2, 2, 3});
  pool.add(Tokens{1, 2, 3});                             // 1-2
  pool.add(Tokens{4, 5, 6});                             // 4-5
  pool.add(Tokens{7, 8, 9});                             // 7-8
  EXPECT_EQ(draft(pool, Tokens{1, 2}, 2), (Tokens{3}));  // a use: 1-2 is the most recent now
  pool.add(Tokens{10, 11, 12});                          // full: 4-5 goes
  EXPECT_EQ(pool.size(), 3);
  EXPECT_TRUE(draft(pool, Tokens{4, 5}, 2).empty());
  EXPECT_EQ(draft(pool, Tokens{1, 2}, 2), (Tokens{3}));
  EXPECT_EQ(draft(pool, Tokens{7, 8}, 2), (Tokens{9}));
  EXPECT_EQ(draft(pool, Tokens{10, 11}, 2), (Tokens{12}));
  // Many more: the size stays bounded.
  Tokens long_text;
  for (TokenId t = 100; t < 1000; ++t) long_text.push_back(t);
  pool.add(long_text);
  EXPECT_EQ(pool.size(), 3);
  EXPECT_EQ(draft(pool, Tokens{997, 998}, 2), (Tokens{999}));
}

}  // namespace
}  // namespace trellis
