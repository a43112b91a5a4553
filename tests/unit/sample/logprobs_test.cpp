// compute_logprobs(): a log-softmax over the whole vocab, hand-checked, stable for large logits,
// and the top-N alternatives in order with ties broken by id.
#include "sample/logprobs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "sample/rng.h"

namespace trellis {
namespace {

TEST(LogprobsTest, TwoTokensMatchHandComputation) {
  // softmax([0, ln 3]) = [1/4, 3/4].
  const std::vector<float> logits = {0.0f, std::log(3.0f)};
  Logprobs result = compute_logprobs(logits, 0, 2);
  EXPECT_EQ(result.chosen.id, 0);
  EXPECT_NEAR(result.chosen.logprob, std::log(0.25), 1e-6);
  ASSERT_EQ(result.top.size(), 2u);
  EXPECT_EQ(result.top[0].id, 1);
  EXPECT_NEAR(result.top[0].logprob, std::log(0.75), 1e-6);
  EXPECT_EQ(result.top[1].id, 0);
  EXPECT_NEAR(result.top[1].logprob, std::log(0.25), 1e-6);
}

TEST(LogprobsTest, ThreeTokensMatchHandComputation) {
  // log(e + e^2 + e^3) = 3.40760596444438.
  EXPECT_NEAR(log_sum_exp(std::vector<float>{1.0f, 2.0f, 3.0f}), 3.40760596444438, 1e-6);
  Logprobs result = compute_logprobs(std::vector<float>{1.0f, 2.0f, 3.0f}, 1, 3);
  EXPECT_NEAR(result.chosen.logprob, -1.40760596444438, 1e-6);
  ASSERT_EQ(result.top.size(), 3u);
  EXPECT_NEAR(result.top[0].logprob, -0.40760596444438, 1e-6);
  EXPECT_NEAR(result.top[2].logprob, -2.40760596444438, 1e-6);
}

TEST(LogprobsTest, ProbabilitiesSumToOne) {
  Rng rng(3);
  std::vector<float> logits(1000);
  for (float& x : logits) x = static_cast<float>(rng.next_double() * 20.0 - 10.0);
  Logprobs result = compute_logprobs(logits, 7, 1000);
  ASSERT_EQ(result.top.size(), 1000u);
  double sum = 0.0;
  for (const TokenLogprob& entry : result.top) {
    EXPECT_LE(entry.logprob, 0.0f);
    sum += std::exp(static_cast<double>(entry.logprob));
  }
  EXPECT_NEAR(sum, 1.0, 1e-5);
  for (size_t i = 1; i < result.top.size(); ++i) {
    EXPECT_GE(result.top[i - 1].logprob, result.top[i].logprob);
  }
}

TEST(LogprobsTest, LargeLogitsDoNotOverflow) {
  // Same differences as [0, ln 3] shifted by 1000: exp(1000) would overflow without the max shift.
  const std::vector<float> logits = {1000.0f, 1000.0f + std::log(3.0f)};
  Logprobs result = compute_logprobs(logits, 1, 0);
  EXPECT_NEAR(result.chosen.logprob, std::log(0.75), 1e-4);
  EXPECT_TRUE(result.top.empty());
}

TEST(LogprobsTest, TopIsOrderedWithTiesByLowestId) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {1.0f, 5.0f, 2.0f, -inf, 5.0f, 2.0f};
  Logprobs result = compute_logprobs(logits, 3, 4);
  ASSERT_EQ(result.top.size(), 4u);
  EXPECT_EQ(result.top[0].id, 1);
  EXPECT_EQ(result.top[1].id, 4);
  EXPECT_EQ(result.top[2].id, 2);
  EXPECT_EQ(result.top[3].id, 5);
  EXPECT_EQ(result.top[0].logprob, result.top[1].logprob);
  EXPECT_EQ(result.chosen.logprob, -inf);
}

TEST(LogprobsTest, TopIsCappedAtTheVocabSize) {
  Logprobs result = compute_logprobs(std::vector<float>{0.0f, 0.0f, 0.0f}, 2, 20);
  ASSERT_EQ(result.top.size(), 3u);
  for (TokenId id = 0; id < 3; ++id) {
    EXPECT_EQ(result.top[id].id, id);
    EXPECT_NEAR(result.top[id].logprob, -std::log(3.0), 1e-6);
  }
}

TEST(LogprobsTest, NanCountsAsMinusInfinity) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Logprobs result = compute_logprobs(std::vector<float>{nan, 0.0f, 0.0f}, 0, 3);
  EXPECT_EQ(result.chosen.logprob, -std::numeric_limits<float>::infinity());
  EXPECT_NEAR(result.top[0].logprob, std::log(0.5), 1e-6);
  EXPECT_EQ(result.top[2].id, 0);
  EXPECT_EQ(log_sum_exp(std::vector<float>(3, -std::numeric_limits<float>::infinity())),
            -std::numeric_limits<double>::infinity());
}

}  // namespace
}  // namespace trellis
