// Layers are split into contiguous non-empty ranges whose largest stage is as small as possible
// (checked against every split), or as the user's counts say.
#include "cluster/layer_split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace trellis {
namespace {

// The smallest possible largest stage, over every way to cut n layers into `stages` ranges.
uint64_t best_by_search(const ModelWeightBytes& bytes, int stages) {
  const auto n = static_cast<int64_t>(bytes.layers.size());
  uint64_t best = UINT64_MAX;
  std::vector<int64_t> cuts(static_cast<size_t>(stages - 1));
  // Cuts c_1 < ... < c_{s-1} in [1, n - 1]: enumerate as combinations.
  std::vector<bool> chosen(static_cast<size_t>(n - 1), false);
  std::fill(chosen.end() - (stages - 1), chosen.end(), true);
  do {
    std::vector<int64_t> bounds{0};
    for (int64_t i = 0; i < n - 1; ++i)
      if (chosen[static_cast<size_t>(i)]) bounds.push_back(i + 1);
    bounds.push_back(n);
    uint64_t worst = 0;
    for (size_t s = 0; s + 1 < bounds.size(); ++s) {
      const LayerRange r{bounds[s], bounds[s + 1], s == 0, s + 2 == bounds.size()};
      worst = std::max(worst, stage_bytes(bytes, r));
    }
    best = std::min(best, worst);
  } while (std::next_permutation(chosen.begin(), chosen.end()));
  return best;
}

TEST(LayerSplit, BalancedSplitIsOptimalAndContiguous) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 40; ++trial) {
    ModelWeightBytes bytes;
    const int n = 2 + static_cast<int>(rng() % 9);
    for (int i = 0; i < n; ++i) bytes.layers.push_back(100 + rng() % 900);
    bytes.output = rng() % 3000;
    for (int stages = 1; stages <= std::min(n, 4); ++stages) {
      Result<std::vector<LayerRange>> split = balanced_split(bytes, stages);
      ASSERT_TRUE(split.ok());
      ASSERT_EQ(static_cast<int>(split->size()), stages);
      uint64_t worst = 0;
      int64_t next = 0;
      for (size_t s = 0; s < split->size(); ++s) {
        const LayerRange& r = (*split)[s];
        EXPECT_EQ(r.begin, next);
        EXPECT_GT(r.end, r.begin);
        EXPECT_EQ(r.first, s == 0);
        EXPECT_EQ(r.last, s + 1 == split->size());
        next = r.end;
        worst = std::max(worst, stage_bytes(bytes, r));
      }
      EXPECT_EQ(next, n);
      EXPECT_EQ(worst, best_by_search(bytes, stages)) << "n " << n << ", stages " << stages;
    }
  }
}

TEST(LayerSplit, AHeavyOutputHeadLeavesTheLastStageFewerLayers) {
  ModelWeightBytes bytes;
  bytes.layers.assign(22, 10);
  bytes.output = 60;  // six layers' worth
  Result<std::vector<LayerRange>> split = balanced_split(bytes, 2);
  ASSERT_TRUE(split.ok());
  EXPECT_EQ((*split)[0].size(), 14);
  EXPECT_EQ((*split)[1].size(), 8);
}

TEST(LayerSplit, RefusesMoreStagesThanLayersAndBadCounts) {
  ModelWeightBytes bytes;
  bytes.layers.assign(3, 1);
  EXPECT_FALSE(balanced_split(bytes, 4).ok());
  EXPECT_FALSE(balanced_split(bytes, 0).ok());
  EXPECT_FALSE(split_by_counts({2, 2}, 3).ok());
  EXPECT_FALSE(split_by_counts({3, 0}, 3).ok());
  EXPECT_FALSE(split_by_counts({}, 3).ok());
  Result<std::vector<LayerRange>> counts = split_by_counts({1, 2}, 3);
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ((*counts)[1].begin, 1);
  EXPECT_EQ((*counts)[1].end, 3);
  EXPECT_TRUE((*counts)[1].last);
}

}  // namespace
}  // namespace trellis
