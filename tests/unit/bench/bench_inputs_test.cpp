// The inputs of the phi and block-size sweeps: φ points quantized to whole blocks, the highest
// reachable hit rate, and the block-size prompt tree whose shared prefixes end inside blocks.
#include <gtest/gtest.h>

#include "bench/bench_tokens.h"
#include "bench/block_size_bench.h"
#include "bench/phi_bench.h"

namespace trellis::bench {
namespace {

TEST(PhiPointsTest, QuantizedToWholeBlocks) {
  // L = 100, B = 16: 7 blocks, the last one partial; a prefix holds at most (100 - 1) / 16 = 6.
  Result<std::vector<PhiPoint>> points = parse_phi_points("0,0.5,0.9,1,max", 100, 16);
  ASSERT_TRUE(points.ok()) << points.error().message;
  ASSERT_EQ(points->size(), 5u);
  const std::vector<std::string> labels = {"0", "0.5", "0.9", "1", "max"};
  const std::vector<int32_t> blocks = {0, 3, 6, 6, 6};  // round(phi * 100 / 16), capped at 6
  for (size_t i = 0; i < points->size(); ++i) {
    const PhiPoint& p = (*points)[i];
    EXPECT_EQ(p.label, labels[i]);
    EXPECT_EQ(p.prefix_blocks, blocks[i]) << p.label;
    EXPECT_EQ(p.prefix_tokens, blocks[i] * 16) << p.label;
    EXPECT_DOUBLE_EQ(p.effective_phi, blocks[i] * 16 / 100.0) << p.label;
  }
}

TEST(PhiPointsTest, WholeBlockPromptKeepsItsLastBlock) {
  // L = 96 = 6 whole blocks: φ = 1 and max share 5 blocks, never the last token.
  Result<std::vector<PhiPoint>> points = parse_phi_points("1,max", 96, 16);
  ASSERT_TRUE(points.ok());
  EXPECT_EQ((*points)[0].prefix_tokens, 80);
  EXPECT_EQ((*points)[1].prefix_tokens, 80);
  // A prompt shorter than a block shares nothing.
  Result<std::vector<PhiPoint>> tiny = parse_phi_points("max,1", 10, 16);
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ((*tiny)[0].prefix_tokens, 0);
  EXPECT_EQ((*tiny)[1].prefix_tokens, 0);
}

TEST(PhiPointsTest, RejectsBadItemsByName) {
  auto message = [](const std::string& list) {
    Result<std::vector<PhiPoint>> r = parse_phi_points(list, 100, 16);
    return r.ok() ? std::string() : r.error().message;
  };
  EXPECT_EQ(message("0,1.5"), "--phi: '1.5' is not a number in [0, 1] or 'max'");
  EXPECT_EQ(message("-0.1"), "--phi: '-0.1' is not a number in [0, 1] or 'max'");
  EXPECT_EQ(message("0,,1"), "--phi: '' is not a number in [0, 1] or 'max'");
  EXPECT_EQ(message("half"), "--phi: 'half' is not a number in [0, 1] or 'max'");
  EXPECT_EQ(message("0.5x"), "--phi: '0.5x' is not a number in [0, 1] or 'max'");
  EXPECT_EQ(message(""), "--phi: give at least one value");
}

TEST(PhiPointsTest, MaxHitRate) {
  EXPECT_DOUBLE_EQ(max_hit_rate(100, 16), 6.0 / 7.0);
  EXPECT_DOUBLE_EQ(max_hit_rate(512, 32), 15.0 / 16.0);
  EXPECT_DOUBLE_EQ(max_hit_rate(8, 16), 0.0);
}

// Tokens a and b have in common from the start.
size_t common_prefix(const std::vector<TokenId>& a, const std::vector<TokenId>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

TEST(BlockSizePromptsTest, TreeOfOddDivergences) {
  const int32_t L = 40;
  const BlockSizePrompts w = block_size_prompts(L, 5, 7, 1000);
  ASSERT_EQ(w.warm.size(), 5u);
  ASSERT_EQ(w.probes.size(), 7u);
  ASSERT_EQ(w.probe_shared.size(), 7u);
  EXPECT_EQ(w.warm[0], bench_tokens(L, 1000, 5000));
  for (const auto& p : w.warm) EXPECT_EQ(p.size(), static_cast<size_t>(L));
  // Warm prompt i > 0 branches off an earlier one at an odd d in [L/4, L - 2].
  for (size_t i = 1; i < w.warm.size(); ++i) {
    size_t longest = 0;
    for (size_t j = 0; j < i; ++j) longest = std::max(longest, common_prefix(w.warm[i], w.warm[j]));
    EXPECT_EQ(longest % 2, 1u) << i;
    EXPECT_GE(longest, 10u) << i;
    EXPECT_LE(longest, 38u) << i;
  }
  // Probe q shares exactly probe_shared[q] tokens (odd, in [L/2, L - 3]) with warm prompt q mod 5.
  for (size_t q = 0; q < w.probes.size(); ++q) {
    const int32_t s = w.probe_shared[q];
    EXPECT_EQ(w.probes[q].size(), static_cast<size_t>(L));
    EXPECT_EQ(s % 2, 1) << q;
    EXPECT_GE(s, 20) << q;
    EXPECT_LE(s, 37) << q;
    EXPECT_EQ(common_prefix(w.probes[q], w.warm[q % 5]), static_cast<size_t>(s)) << q;
  }
  // Deterministic.
  const BlockSizePrompts again = block_size_prompts(L, 5, 7, 1000);
  EXPECT_EQ(again.warm, w.warm);
  EXPECT_EQ(again.probes, w.probes);
  EXPECT_EQ(again.probe_shared, w.probe_shared);
}

}  // namespace
}  // namespace trellis::bench
