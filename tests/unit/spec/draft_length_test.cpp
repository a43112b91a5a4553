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

}  // namespace
}  // namespace trellis
