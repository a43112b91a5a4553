// The draft length follows the acceptance history and shares a step's rows with the batch.
#include "spec/draft_length.h"

#include <gtest/gtest.h>

namespace trellis {
namespace {

TEST(DraftLengthTest, StartsHopefulAndShrinksAsDraftsMiss) {
  DraftLength length(DraftLengthConfig{8, 0.2, 0.5, 4, 32});
  EXPECT_EQ(length.next(0), 8);
  length.record(8, 8);  // all accepted: stays at the cap
  EXPECT_EQ(length.next(0), 8);
  length.record(8, 4);  // acceptance 0.75: a run of 4
  EXPECT_DOUBLE_EQ(length.acceptance(), 0.75);
  EXPECT_EQ(length.next(0), 4);
  length.record(4, 0);  // 0.375: 1.6 -> 2
  EXPECT_EQ(length.next(0), 2);
  length.record(2, 0);  // 0.1875: below 0.2, no drafts
  EXPECT_EQ(length.next(0), 0);
}

TEST(DraftLengthTest, NeverHittingMeansNoDraftsButAProbeNowAndThen) {
  DraftLength length(DraftLengthConfig{8, 0.2, 0.5, 4, 32});
  for (int i = 0; i < 6; ++i) length.record(length.next(0) > 0 ? 8 : 0, 0);
  ASSERT_LT(length.acceptance(), 0.2);
  int drafted_steps = 0;
  for (int step = 0; step < 16; ++step) drafted_steps += length.next(0);
  EXPECT_EQ(drafted_steps, 4);  // one token every fourth step
  // A probe that hits brings the drafts back.
  for (int i = 0; i < 4; ++i) length.record(1, 1);
  EXPECT_GT(length.next(0), 0);
}

TEST(DraftLengthTest, TheBatchSharesTheStepsRows) {
  DraftLength length(DraftLengthConfig{8, 0.2, 0.5, 4, 32});
  EXPECT_EQ(length.next(1), 8);  // alone: up to max_tokens
  EXPECT_EQ(length.next(4), 7);  // (32 - 4) / 4
  EXPECT_EQ(length.next(8), 3);
  EXPECT_EQ(length.next(16), 1);
  EXPECT_EQ(length.next(17), 0);  // compute-bound: no room for drafts
  EXPECT_EQ(length.next(200), 0);
  length.record(0, 0);  // nothing drafted: nothing learned
  EXPECT_DOUBLE_EQ(length.acceptance(), 1.0);
}

// Step times as this machine's Q4_0 kernel gave them for a 1.1B model: a tile of 8 rows, then
// every row paid for.
StepCost tiled_cost() {
  StepCost cost;
  cost.record(1, 22.7);
  cost.record(8, 36.0);
  cost.record(9, 43.0);
  cost.record(16, 72.0);
  cost.record(24, 108.0);
  cost.record(32, 141.0);
  return cost;
}

TEST(DraftLengthTest, TheLengthWithTheMostTokensPerMillisecondWins) {
  DraftLength length(DraftLengthConfig{8, 0.2, 0.5, 4, 32});
  const StepCost cost = tiled_cost();
  // Alone and hopeful (counted as 0.9 here): 5.7 tokens expected in 36 ms beat 6.1 in 43 ms.
  EXPECT_EQ(length.next(1, cost), 7);
  // Eight sequences: 3.4 tokens each in 141 ms lose to 1 in 36 ms.
  EXPECT_EQ(length.next(8, cost), 0);
  EXPECT_EQ(length.next(8), 3);  // with nothing measured, the row budget alone decides
  length.record(8, 4);           // acceptance 0.75
  // Now 1.75 tokens each in 72 ms lose to 1 in 36 ms: compute-bound, no drafts.
  EXPECT_EQ(length.next(8, cost), 0);
  // Alone, the rows are cheap: the acceptance run's 4 tokens (3.05 expected in 30.3 ms).
  EXPECT_EQ(length.next(1, cost), 4);
  StepCost flat;  // memory-bound at every size: rows nearly free
  for (int32_t rows = 1; rows <= 32; ++rows) flat.record(rows, 20.0 + 0.1 * rows);
  EXPECT_EQ(length.next(1, flat), 4);  // the acceptance run's length, as without costs
}

TEST(DraftLengthTest, ProbesOnlyWhereAHitWouldPay) {
  const StepCost cost = tiled_cost();
  DraftLength alone(DraftLengthConfig{8, 0.2, 0.5, 4, 32});
  DraftLength batched(DraftLengthConfig{8, 0.2, 0.5, 4, 32});
  for (int i = 0; i < 6; ++i) {
    alone.record(8, 0);
    batched.record(8, 0);
  }
  int alone_drafts = 0;
  int batched_drafts = 0;
  for (int step = 0; step < 16; ++step) {
    alone_drafts += alone.next(1, cost);      // 2 rows cost less than two steps of 1
    batched_drafts += batched.next(8, cost);  // 16 rows cost as much as two steps of 8
  }
  EXPECT_EQ(alone_drafts, 4);
  EXPECT_EQ(batched_drafts, 0);
  EXPECT_EQ(batched.next(1, cost), 1);  // the batch gone: the probe it waited for
}

}  // namespace
}  // namespace trellis
