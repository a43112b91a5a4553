// Mean, sample standard deviation and nearest-rank percentiles of benchmark measurements.
#include <gtest/gtest.h>

#include <cmath>

#include "bench/stats.h"

namespace trellis::bench {
namespace {

TEST(StatsTest, MeanAndSampleStddev) {
  const Stats s = stats({2, 4, 4, 4, 5, 5, 7, 9});
  EXPECT_DOUBLE_EQ(s.mean, 5.0);
  // Squared deviations sum to 32; the sample stddev divides by n - 1 = 7 (not by n = 8, which
  // would give exactly 2).
  EXPECT_DOUBLE_EQ(s.stddev, std::sqrt(32.0 / 7.0));
}

TEST(StatsTest, EmptyAndSingleValue) {
  const Stats empty = stats({});
  EXPECT_EQ(empty.mean, 0.0);
  EXPECT_EQ(empty.stddev, 0.0);
  const Stats one = stats({3.5});
  EXPECT_EQ(one.mean, 3.5);
  EXPECT_EQ(one.stddev, 0.0);
  const Stats two = stats({1, 3});
  EXPECT_DOUBLE_EQ(two.mean, 2.0);
  EXPECT_DOUBLE_EQ(two.stddev, std::sqrt(2.0));
}

TEST(PercentileTest, NearestRankOnSortedValues) {
  // 101 values 0..100: index round(p * 100) is the value itself.
  std::vector<double> values;
  for (int i = 0; i <= 100; ++i) values.push_back(i);
  EXPECT_EQ(percentile(values, 0), 0.0);
  EXPECT_EQ(percentile(values, 0.5), 50.0);
  EXPECT_EQ(percentile(values, 0.99), 99.0);
  EXPECT_EQ(percentile(values, 1), 100.0);
}

TEST(PercentileTest, RoundsToTheNearestIndex) {
  // Ten values: p * 9 = 4.5 rounds up to index 5; 0.99 * 9 = 8.91 rounds to index 9.
  const std::vector<double> values = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19};
  EXPECT_EQ(percentile(values, 0), 10.0);
  EXPECT_EQ(percentile(values, 0.5), 15.0);
  EXPECT_EQ(percentile(values, 0.99), 19.0);
  EXPECT_EQ(percentile(values, 1), 19.0);
  EXPECT_EQ(percentile(values, 0.4), 14.0);  // 3.6 -> 4
}

TEST(PercentileTest, EmptyAndOneValue) {
  EXPECT_EQ(percentile({}, 0.5), 0.0);
  EXPECT_EQ(percentile({}, 0.99), 0.0);
  EXPECT_EQ(percentile({7.5}, 0), 7.5);
  EXPECT_EQ(percentile({7.5}, 0.5), 7.5);
  EXPECT_EQ(percentile({7.5}, 1), 7.5);
}

TEST(PercentileTest, UnsortedInput) {
  const std::vector<double> values = {30, 10, 50, 20, 40};
  EXPECT_EQ(percentile(values, 0), 10.0);
  EXPECT_EQ(percentile(values, 0.5), 30.0);
  EXPECT_EQ(percentile(values, 0.99), 50.0);
  EXPECT_EQ(percentile(values, 1), 50.0);
  EXPECT_EQ(percentile(values, 0.25), 20.0);
}

}  // namespace
}  // namespace trellis::bench
