// PrefixCache with a sliding-window layer kept in window pages: a request holds the pages of its
// next step's window only and lets go of the older ones as it advances; the cache keeps the pages
// of what it indexes until they are needed elsewhere; a match is shortened to a length whose
// window is all there; copies of a partial block carry the windowed layer along; nothing leaks.
//
// Blocks of 4 positions, a window of 6, steps of up to 4 positions; layer 0 is windowed, layer 1
// is not. The "KV" of position p is the token (keys) in both layers.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "prefix/prefix_cache.h"
#include "unit/prefix/prefix_test_support.h"

namespace trellis {
namespace {

using prefix_test::concat;
using prefix_test::range;
using Tokens = std::vector<TokenId>;
constexpr int32_t B = 4;
constexpr int32_t kWindow = 6;
constexpr int32_t kStep = 4;

KvLayout windowed_layout() {
  KvLayout layout{2, 1, 1, B, KvTypes::both(KvType::F32)};
  layout.windowed = {1, 0};
  return layout;
}

struct Fixture {
  static constexpr int32_t kBlocks = 16;
  static constexpr int32_t kPages = 12;
  KvStorage kv = std::move(KvStorage::create(windowed_layout(), kBlocks, kPages).value());
  BlockPool pool{kBlocks};
  WindowPages pages{kv, pool};
  PrefixCache cache{pool, kv, PrefixCacheConfig{}, WindowPolicy{&pages, kWindow, kStep}};

  float key(const SequenceKv& seq, int64_t layer, int32_t position) const {
    float k = 0;
    std::memcpy(&k,
                kv.keys(seq.block_table()[static_cast<size_t>(position / B)], layer, 0) +
                    sizeof(float) * static_cast<size_t>(position % B),
                sizeof(float));
    return k;
  }
  // Stands for the forward pass, step by step: holds each step's window, then writes the step's
  // positions in both layers and checks that the window before each one reads back.
  void compute(SequenceKv& seq, const Tokens& tokens, int32_t first) {
    for (int32_t begin = first; begin < static_cast<int32_t>(tokens.size()); begin += kStep) {
      const int32_t end = std::min(begin + kStep, static_cast<int32_t>(tokens.size()));
      cache.prepare_window(seq, begin, end);
      EXPECT_LE(seq.window_end() - seq.window_begin(), PrefixCache::page_quota(B, cache.window()));
      for (int32_t p = begin; p < end; ++p) {
        const auto k = static_cast<float>(tokens[static_cast<size_t>(p)]);
        for (int64_t layer = 0; layer < 2; ++layer)
          std::memcpy(kv.keys(seq.block_table()[static_cast<size_t>(p / B)], layer, 0) +
                          sizeof(float) * static_cast<size_t>(p % B),
                      &k, sizeof(float));
        for (int32_t q = std::max(0, p - kWindow + 1); q <= p; ++q)
          EXPECT_EQ(key(seq, 0, q), static_cast<float>(tokens[static_cast<size_t>(q)])) << q;
      }
    }
  }
  SequenceKv admit(const Tokens& tokens, int32_t expected_match) {
    const PrefixMatch m = cache.match("", tokens);
    EXPECT_EQ(m.n_tokens, expected_match);
    Result<SequenceKv> seq = cache.admit("", m, static_cast<int32_t>(tokens.size()));
    EXPECT_TRUE(seq.ok()) << seq.error().message;
    return std::move(seq).value();
  }
  // A whole request: admit, compute what was not matched, cache it all, release.
  void run(const Tokens& tokens, int32_t expected_match) {
    SequenceKv seq = admit(tokens, expected_match);
    compute(seq, tokens, expected_match);
    for (int32_t p = 0; p < static_cast<int32_t>(tokens.size()); ++p)
      EXPECT_EQ(key(seq, 1, p), static_cast<float>(tokens[static_cast<size_t>(p)])) << p;
    cache.insert(seq, tokens, /*finished=*/true);
  }
  void expect_ok() const {
    Status status = cache.check_invariants();
    EXPECT_TRUE(status.ok()) << (status.ok() ? "" : status.error().message);
  }
};

TEST(PrefixCacheWindow, ARequestHoldsItsWindowOnlyAndLetsGoAsItAdvances) {
  Fixture f;
  const Tokens tokens = range(100, 139);  // 40 positions, 10 blocks
  SequenceKv seq = f.admit(tokens, 0);
  f.compute(seq, tokens, 0);
  // The last step began at 36: its window starts at 31 (block 7); blocks 7-9 are held.
  EXPECT_EQ(seq.window_begin(), 7);
  EXPECT_EQ(seq.window_end(), 10);
  EXPECT_EQ(f.pages.n_held(), 3);
  EXPECT_LE(f.pages.peak_held(), 4);
  // The cache did not index blocks 0-6: their pages went free as soon as they were let go.
  for (int32_t j = 0; j < 7; ++j) EXPECT_FALSE(f.pages.has_page(seq.block_table()[j])) << j;
  f.expect_ok();
  seq.reset();
  EXPECT_EQ(f.pages.n_held(), 0);
  EXPECT_EQ(f.pages.n_reserved(), 0);
  f.expect_ok();
}

TEST(PrefixCacheWindow, AMatchIsShortenedToALengthWhoseWindowIsThere) {
  Fixture f;
  const Tokens first = range(100, 119);  // 20 positions: blocks 0-4
  f.run(first, 0);
  // Its last window (blocks 2-4) stays, evictable; blocks 0-1 lost their pages on the way.
  EXPECT_EQ(f.pages.n_evictable(), 3);
  EXPECT_EQ(f.pages.n_held(), 0);
  f.expect_ok();
  // The whole prefix: its window (positions 15-19, blocks 3-4) is there.
  {
    SequenceKv seq = f.admit(concat(first, {7}), 20);
    EXPECT_EQ(seq.window_begin(), 3);
    seq.reset();
  }
  // 14 positions: window 9-13 in blocks 2-3, there; the copy of block 3's first 2 slots carries
  // the windowed layer.
  {
    const Tokens prompt = concat(Tokens(first.begin(), first.begin() + 14), {1, 2, 3});
    SequenceKv seq = f.admit(prompt, 14);
    for (int32_t p = 9; p < 14; ++p) EXPECT_EQ(f.key(seq, 0, p), prompt[p]) << p;
    f.compute(seq, prompt, 14);
  }
  // 10 positions: window 5-9 reaches block 1, whose page is gone, and so on down: no match.
  f.run(concat(Tokens(first.begin(), first.begin() + 10), {5, 6, 7, 8}), 0);
  f.expect_ok();
}

TEST(PrefixCacheWindow, EvictablePagesAreTakenBackWhenRequestsNeedThem) {
  Fixture f;
  // Ten different 12-position prompts, each leaving its last window's pages evictable, on 12
  // pages: later requests take back the oldest, and the oldest prompts' matches shorten to 0.
  for (TokenId t = 0; t < 10; ++t) f.run(range(1000 * (t + 1), 1000 * (t + 1) + 11), 0);
  EXPECT_GT(f.pages.n_evicted(), 0);
  f.expect_ok();
  const Tokens newest = range(10000, 10011);
  f.run(concat(newest, {1}), 12);
  const Tokens oldest = range(1000, 1011);
  f.run(concat(oldest, {1}), 0);
  f.expect_ok();
  f.cache.flush();
  EXPECT_EQ(f.pages.n_free(), Fixture::kPages);
}

TEST(PrefixCacheWindow, AForkHoldsItsParentsWindowAndCopiesThePartialBlock) {
  Fixture f;
  const Tokens tokens = range(1, 18);
  SequenceKv parent = f.admit(tokens, 0);
  f.compute(parent, tokens, 0);
  Result<SequenceKv> child = f.cache.fork(parent, 18);
  ASSERT_TRUE(child.ok()) << child.error().message;
  EXPECT_EQ(child->window_begin(), 3);  // window of position 18: 13-17, blocks 3-4
  for (int32_t p = 13; p < 18; ++p) EXPECT_EQ(f.key(*child, 0, p), tokens[p]) << p;
  EXPECT_NE(child->block_table()[4], parent.block_table()[4]);
  child->reset();
  parent.reset();
  f.expect_ok();
  EXPECT_EQ(f.pages.n_free(), Fixture::kPages);
}

TEST(PrefixCacheWindow, AdmissionWaitsWhenThePagesAreAllReserved) {
  Fixture f;  // 12 pages, 5 per request: two requests run, a third waits
  const int32_t quota = PrefixCache::page_quota(B, f.cache.window());
  ASSERT_EQ(quota, 5);
  SequenceKv a = f.admit(range(1, 8), 0);
  SequenceKv b = f.admit(range(11, 18), 0);
  const PrefixMatch m = f.cache.match("", range(21, 28));
  Result<SequenceKv> c = f.cache.admit("", m, 8);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("window pages"), std::string::npos) << c.error().message;
  a.reset();
  EXPECT_TRUE(f.cache.admit("", m, 8).ok());
  f.expect_ok();
}

}  // namespace
}  // namespace trellis
