// What steps cost by row count: the measured sizes, and estimates for the others.
#include "spec/step_cost.h"

#include <gtest/gtest.h>

namespace trellis {
namespace {

TEST(StepCostTest, KnowsNothingUntilAStepIsMeasured) {
  StepCost cost;
  EXPECT_FALSE(cost.known());
  EXPECT_EQ(cost.estimate_ms(8), 0.0);
  cost.record(0, 5.0);  // nonsense is ignored
  cost.record(4, -1.0);
  EXPECT_FALSE(cost.known());
}

TEST(StepCostTest, EstimatesBetweenMeasuredSizesAndOptimisticallyAbove) {
  StepCost cost;
  cost.record(8, 36.0);
  cost.record(16, 72.0);
  EXPECT_DOUBLE_EQ(cost.estimate_ms(8), 36.0);
  EXPECT_DOUBLE_EQ(cost.estimate_ms(12), 54.0);  // on the line between 8 and 16
  EXPECT_DOUBLE_EQ(cost.estimate_ms(32), 72.0);  // above: as the largest measured, until tried
  EXPECT_DOUBLE_EQ(cost.estimate_ms(2), 36.0);   // below: at most what 8 rows cost
  EXPECT_DOUBLE_EQ(cost.estimate_ms(1000), 72.0);
}

TEST(StepCostTest, FollowsTheLatestSteps) {
  StepCost cost;
  cost.record(4, 10.0);
  for (int i = 0; i < 40; ++i) cost.record(4, 30.0);  // the machine got busier
  EXPECT_NEAR(cost.estimate_ms(4), 30.0, 0.01);
}

TEST(StepCostTest, ASizeNotSeenLatelyIsTriedAgain) {
  StepCost cost;
  cost.record(9, 400.0);  // one slow step (the machine was busy)
  for (int i = 0; i < StepCost::kMemorySteps - 1; ++i) cost.record(8, 36.0);
  EXPECT_DOUBLE_EQ(cost.estimate_ms(9), 400.0);
  cost.record(8, 36.0);
  EXPECT_DOUBLE_EQ(cost.estimate_ms(9), 36.0);  // forgotten: as the largest size below
}

}  // namespace
}  // namespace trellis
