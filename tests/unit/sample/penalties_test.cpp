// apply_penalties(): each penalty changes exactly the logits it should, by exactly its formula.
// Values are chosen to be exact in binary floating point, so comparisons are exact.
#include "sample/penalties.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cstdint>
#include <vector>

namespace trellis {
namespace {

std::vector<float> penalized(const SamplingParams& params, std::vector<float> logits,
                             const std::vector<TokenId>& history) {
  std::vector<int32_t> counts(logits.size(), 0);
  apply_penalties(params, history, logits, counts);
  EXPECT_EQ(counts, std::vector<int32_t>(logits.size(), 0)) << "scratch not restored";
  return logits;
}

const std::vector<float> kLogits = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f};
// Token 0 twice, 1 once, 3 once, 4 once; token 2 never.
const std::vector<TokenId> kHistory = {0, 1, 0, 3, 4};

TEST(PenaltiesTest, RepetitionDividesPositiveAndMultipliesNegative) {
  SamplingParams params;
  params.repetition_penalty = 2.0f;
  params.penalty_last_n = -1;
  // 2/2, -1*2, untouched, 3/2, 0*2 (zero stays zero). Counts do not matter.
  EXPECT_EQ(penalized(params, kLogits, kHistory),
            (std::vector<float>{1.0f, -2.0f, 0.5f, 1.5f, 0.0f}));
}

TEST(PenaltiesTest, RepetitionBelowOneEncourages) {
  SamplingParams params;
  params.repetition_penalty = 0.5f;
  params.penalty_last_n = -1;
  EXPECT_EQ(penalized(params, kLogits, kHistory),
            (std::vector<float>{4.0f, -0.5f, 0.5f, 6.0f, 0.0f}));
}

TEST(PenaltiesTest, FrequencyScalesWithCount) {
  SamplingParams params;
  params.frequency_penalty = 0.5f;
  params.penalty_last_n = -1;
  // Token 0: 2 - 2 * 0.5; tokens 1, 3, 4: minus 0.5 once.
  EXPECT_EQ(penalized(params, kLogits, kHistory),
            (std::vector<float>{1.0f, -1.5f, 0.5f, 2.5f, -0.5f}));
}

TEST(PenaltiesTest, PresenceIsOncePerToken) {
  SamplingParams params;
  params.presence_penalty = 0.25f;
  params.penalty_last_n = -1;
  EXPECT_EQ(penalized(params, kLogits, kHistory),
            (std::vector<float>{1.75f, -1.25f, 0.5f, 2.75f, -0.25f}));
}

TEST(PenaltiesTest, NegativeFrequencyAndPresenceEncourage) {
  SamplingParams params;
  params.frequency_penalty = -1.0f;
  params.presence_penalty = -0.5f;
  params.penalty_last_n = -1;
  EXPECT_EQ(penalized(params, kLogits, kHistory),
            (std::vector<float>{4.5f, 0.5f, 0.5f, 4.5f, 1.5f}));
}

TEST(PenaltiesTest, AllThreeCombineRepetitionFirst) {
  SamplingParams params;
  params.repetition_penalty = 2.0f;
  params.frequency_penalty = 0.5f;
  params.presence_penalty = 0.25f;
  params.penalty_last_n = -1;
  // Token 0: 2/2 - (2*0.5 + 0.25) = -0.25; token 1: -1*2 - 0.75 = -2.75;
  // token 3: 3/2 - 0.75 = 0.75; token 4: 0 - 0.75.
  EXPECT_EQ(penalized(params, kLogits, kHistory),
            (std::vector<float>{-0.25f, -2.75f, 0.5f, 0.75f, -0.75f}));
}

TEST(PenaltiesTest, WindowIsTheLastNTokens) {
  SamplingParams params;
  params.frequency_penalty = 1.0f;
  // Last 3 of {0, 1, 0, 3, 4} are {0, 3, 4}: token 0 counted once, token 1 not at all.
  params.penalty_last_n = 3;
  EXPECT_EQ(penalized(params, kLogits, kHistory),
            (std::vector<float>{1.0f, -1.0f, 0.5f, 2.0f, -1.0f}));
  // A window longer than the history is the whole history.
  params.penalty_last_n = 100;
  EXPECT_EQ(penalized(params, kLogits, kHistory),
            (std::vector<float>{0.0f, -2.0f, 0.5f, 2.0f, -1.0f}));
}

TEST(PenaltiesTest, ZeroWindowOrNeutralValuesChangeNothing) {
  SamplingParams params;
  params.repetition_penalty = 3.0f;
  params.penalty_last_n = 0;
  EXPECT_EQ(penalized(params, kLogits, kHistory), kLogits);
  EXPECT_EQ(penalized(SamplingParams{}, kLogits, kHistory), kLogits);
  params.penalty_last_n = -1;
  EXPECT_EQ(penalized(params, kLogits, {}), kLogits);
}

TEST(PenaltiesTest, OverflowIsClampedToTheLargestFloat) {
  SamplingParams params;
  params.repetition_penalty = 0.5f;
  params.penalty_last_n = -1;
  EXPECT_EQ(penalized(params, {3e38f, 1.0f}, {0, 1}), (std::vector<float>{FLT_MAX, 2.0f}));
}

}  // namespace
}  // namespace trellis
