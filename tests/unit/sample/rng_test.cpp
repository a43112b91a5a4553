// Rng: reproducible streams, different seeds give different streams, uniform doubles in [0, 1).
#include "sample/rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

namespace trellis {
namespace {

TEST(RngTest, SplitMix64MatchesPublishedValues) {
  // First outputs of splitmix64 seeded with 0 (the algorithm's reference sequence).
  uint64_t state = 0;
  EXPECT_EQ(splitmix64_next(state), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(splitmix64_next(state), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(splitmix64_next(state), 0x06C45D188009454Full);
}

TEST(RngTest, SameSeedSameStream) {
  Rng a(42);
  Rng b(42);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(a.next_u64(), b.next_u64()) << i;
}

TEST(RngTest, ReseedRestartsTheStream) {
  Rng rng(7);
  std::vector<uint64_t> first;
  for (int i = 0; i < 10; ++i) first.push_back(rng.next_u64());
  rng.reseed(7);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(rng.next_u64(), first[i]);
}

TEST(RngTest, DifferentSeedsDiffer) {
  Rng a(1);
  Rng b(2);
  int equal = 0;
  for (int i = 0; i < 100; ++i) equal += a.next_u64() == b.next_u64();
  EXPECT_EQ(equal, 0);
}

TEST(RngTest, DoublesAreInUnitIntervalWithTheRightMean) {
  Rng rng(123);
  const int n = 100000;
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    double u = rng.next_double();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  // Mean of U(0,1) is 1/2 with stddev sqrt(1/12)/sqrt(n); allow 5 stddevs.
  EXPECT_NEAR(sum / n, 0.5, 5.0 * std::sqrt(1.0 / 12.0 / n));
}

TEST(RngTest, DerivedSeedsAreDistinctAndIndexZeroIsTheSeed) {
  EXPECT_EQ(derive_seed(99, 0), 99u);
  std::set<uint64_t> seeds;
  for (uint64_t index = 0; index < 64; ++index) seeds.insert(derive_seed(99, index));
  EXPECT_EQ(seeds.size(), 64u);
  EXPECT_NE(derive_seed(99, 1), derive_seed(100, 1));
  EXPECT_EQ(derive_seed(99, 5), derive_seed(99, 5));
}

}  // namespace
}  // namespace trellis
