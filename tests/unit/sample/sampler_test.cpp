// Sampler: greedy and its ties, seeded reproducibility, the drawn distribution, and that top-k,
// top-p and min-p keep exactly the tokens they should (small vocabs with hand-computed answers).
#include "sample/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include "sample/rng.h"

namespace trellis {
namespace {

Sampler make_sampler(const SamplingParams& params, int32_t vocab_size) {
  Result<Sampler> sampler = Sampler::create(params, vocab_size);
  EXPECT_TRUE(sampler.ok()) << sampler.error().message;
  return std::move(*sampler);
}

SamplingParams greedy_params() {
  SamplingParams params;
  params.temperature = 0.0f;
  return params;
}

// How often each token is drawn in n_draws calls.
std::map<TokenId, int> histogram(Sampler& sampler, const std::vector<float>& logits, int n_draws,
                                 const std::vector<TokenId>& history = {}) {
  std::map<TokenId, int> counts;
  for (int i = 0; i < n_draws; ++i) ++counts[sampler.sample(logits, history)];
  return counts;
}

std::set<TokenId> drawn_set(const std::map<TokenId, int>& counts) {
  std::set<TokenId> ids;
  for (const auto& [id, count] : counts) ids.insert(id);
  return ids;
}

// Allowed deviation of a count from n*p: 5 binomial standard deviations (a correct sampler fails
// this with probability ~6e-7 per check; the seed is fixed anyway, so a pass is stable).
double tolerance(int n, double p) {
  return 5.0 * std::sqrt(n * p * (1.0 - p));
}

TEST(SamplerTest, CreateRejectsInvalidParamsAndVocab) {
  SamplingParams params;
  params.top_p = 0.0f;
  Result<Sampler> bad_params = Sampler::create(params, 10);
  ASSERT_FALSE(bad_params.ok());
  EXPECT_NE(bad_params.error().message.find("top_p"), std::string::npos);
  Result<Sampler> bad_vocab = Sampler::create(SamplingParams{}, 0);
  ASSERT_FALSE(bad_vocab.ok());
  EXPECT_NE(bad_vocab.error().message.find("vocab size"), std::string::npos);
}

TEST(SamplerTest, GreedyPicksArgmax) {
  Sampler sampler = make_sampler(greedy_params(), 5);
  EXPECT_EQ(sampler.sample(std::vector<float>{0.1f, 2.5f, -1.0f, 2.4f, 0.0f}, {}), 1);
  EXPECT_EQ(sampler.sample(std::vector<float>{-3.0f, -2.0f, -1.0f, -4.0f, -5.0f}, {}), 2);
  EXPECT_EQ(sampler.sample(std::vector<float>{0.0f, 0.0f, 0.0f, 0.0f, 9.0f}, {}), 4);
}

TEST(SamplerTest, GreedyTiesGoToLowestId) {
  Sampler sampler = make_sampler(greedy_params(), 5);
  EXPECT_EQ(sampler.sample(std::vector<float>{1.0f, 3.0f, 3.0f, 0.0f, 3.0f}, {}), 1);
  EXPECT_EQ(sampler.sample(std::vector<float>{7.0f, 7.0f, 7.0f, 7.0f, 7.0f}, {}), 0);
}

TEST(SamplerTest, NanAndInfinityLogitsAreHandled) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  Sampler greedy = make_sampler(greedy_params(), 4);
  EXPECT_EQ(greedy.sample(std::vector<float>{nan, 1.0f, nan, 0.5f}, {}), 1);
  EXPECT_EQ(greedy.sample(std::vector<float>{1.0f, inf, 2.0f, inf}, {}), 1);
  SamplingParams params;
  params.top_p = 0.9f;
  Sampler sampler = make_sampler(params, 4);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(sampler.sample(std::vector<float>{nan, -inf, 3.0f, nan}, {}), 2);
  }
  // Every logit -inf: all weights are equal, top_p = 0.9 needs all 4, the draw is uniform.
  std::map<TokenId, int> counts = histogram(sampler, std::vector<float>(4, -inf), 400);
  EXPECT_EQ(drawn_set(counts), (std::set<TokenId>{0, 1, 2, 3}));
}

TEST(SamplerTest, TopK1EqualsGreedyForAnyTemperature) {
  const int32_t vocab = 97;
  Rng rng(5);
  Sampler greedy = make_sampler(greedy_params(), vocab);
  for (float temperature : {0.05f, 0.7f, 1.0f, 3.0f, 100.0f}) {
    SamplingParams params;
    params.temperature = temperature;
    params.top_k = 1;
    params.seed = 17;
    Sampler top1 = make_sampler(params, vocab);
    for (int round = 0; round < 50; ++round) {
      std::vector<float> logits(vocab);
      // Coarse values so that ties are common.
      for (float& x : logits) x = static_cast<float>(rng.next_u64() % 8) - 4.0f;
      ASSERT_EQ(top1.sample(logits, {}), greedy.sample(logits, {})) << temperature;
    }
  }
}

TEST(SamplerTest, FixedSeedIsReproducibleAndOtherSeedsDiffer) {
  const int32_t vocab = 50;
  std::vector<float> logits(vocab);
  for (int32_t i = 0; i < vocab; ++i) logits[i] = 0.05f * static_cast<float>(i % 7);
  auto draws = [&](uint64_t seed) {
    SamplingParams params;
    params.seed = seed;
    Sampler sampler = make_sampler(params, vocab);
    std::vector<TokenId> out;
    for (int i = 0; i < 200; ++i) out.push_back(sampler.sample(logits, {}));
    return out;
  };
  EXPECT_EQ(draws(1234), draws(1234));
  EXPECT_NE(draws(1234), draws(1235));

  SamplingParams params;
  params.seed = 1234;
  Sampler sampler = make_sampler(params, vocab);
  std::vector<TokenId> first;
  for (int i = 0; i < 200; ++i) first.push_back(sampler.sample(logits, {}));
  sampler.reseed(1234);
  std::vector<TokenId> again;
  for (int i = 0; i < 200; ++i) again.push_back(sampler.sample(logits, {}));
  EXPECT_EQ(first, again);
  EXPECT_EQ(first, draws(1234));
}

TEST(SamplerTest, SmallTemperatureApproachesGreedy) {
  const std::vector<float> logits = {1.0f, 2.0f, 1.5f, 0.0f, 1.99f};
  for (float temperature : {1e-4f, 1e-6f, 1e-20f}) {
    SamplingParams params;
    params.temperature = temperature;
    Sampler sampler = make_sampler(params, 5);
    // At T = 1e-4 the runner-up (1.99) has weight exp(-0.01 / 1e-4) = e^-100, i.e. 0 in float.
    std::map<TokenId, int> counts = histogram(sampler, logits, 2000);
    EXPECT_EQ(counts[1], 2000) << temperature;
  }
  // At T = 0.1, p(1.99) / p(2.0) = e^-0.1 = 0.905: far from greedy still.
  SamplingParams params;
  params.temperature = 0.1f;
  Sampler sampler = make_sampler(params, 5);
  std::map<TokenId, int> counts = histogram(sampler, logits, 2000);
  EXPECT_GT(counts[4], 500);
}

TEST(SamplerTest, DrawsFollowTheSoftmax) {
  // softmax([0, ln 3]) = [1/4, 3/4].
  Sampler sampler = make_sampler(SamplingParams{}, 2);
  const int n = 20000;
  std::map<TokenId, int> counts = histogram(sampler, {0.0f, std::log(3.0f)}, n);
  EXPECT_NEAR(counts[1], 0.75 * n, tolerance(n, 0.75));
  EXPECT_EQ(counts[0] + counts[1], n);
}

TEST(SamplerTest, DrawsFollowTheSoftmaxOverFourTokens) {
  // softmax(ln [1, 2, 3, 4]) = [0.1, 0.2, 0.3, 0.4].
  SamplingParams params;
  params.seed = 99;
  Sampler sampler = make_sampler(params, 4);
  const int n = 20000;
  std::map<TokenId, int> counts =
      histogram(sampler, {0.0f, std::log(2.0f), std::log(3.0f), std::log(4.0f)}, n);
  for (TokenId id = 0; id < 4; ++id) {
    const double p = 0.1 * (id + 1);
    EXPECT_NEAR(counts[id], p * n, tolerance(n, p)) << id;
  }
}

TEST(SamplerTest, TemperatureSharpensAndFlattens) {
  // logits [0, ln 3] / T: at T = 2 the weights are [1, sqrt 3], p1 = sqrt3 / (1 + sqrt3) = 0.634;
  // at T = 0.5 they are [1, 9], p1 = 0.9.
  const int n = 20000;
  for (auto [temperature, p1] :
       {std::pair{2.0f, std::sqrt(3.0) / (1.0 + std::sqrt(3.0))}, std::pair{0.5f, 0.9}}) {
    SamplingParams params;
    params.temperature = temperature;
    Sampler sampler = make_sampler(params, 2);
    std::map<TokenId, int> counts = histogram(sampler, {0.0f, std::log(3.0f)}, n);
    EXPECT_NEAR(counts[1], p1 * n, tolerance(n, p1)) << temperature;
  }
}

TEST(SamplerTest, TopKKeepsTheKHighestWithLowerIdsWinningTies) {
  // Ranks: id1 (3), id3 (3), id2 (2), id4 (2), id0 (1). top_k = 3 keeps {1, 3, 2}.
  SamplingParams params;
  params.top_k = 3;
  params.temperature = 100.0f;  // nearly uniform over the kept ones, so all of them show up
  Sampler sampler = make_sampler(params, 5);
  std::map<TokenId, int> counts = histogram(sampler, {1.0f, 3.0f, 2.0f, 3.0f, 2.0f}, 3000);
  EXPECT_EQ(drawn_set(counts), (std::set<TokenId>{1, 2, 3}));
}

TEST(SamplerTest, TopKRenormalizesOverTheKept) {
  // Probabilities ∝ [1, 2, 3, 4] at ids [3, 0, 2, 1]; top_k = 2 keeps ids 1 (4) and 2 (3):
  // p(1) = 4/7.
  SamplingParams params;
  params.top_k = 2;
  Sampler sampler = make_sampler(params, 4);
  const int n = 20000;
  std::map<TokenId, int> counts =
      histogram(sampler, {std::log(2.0f), std::log(4.0f), std::log(3.0f), std::log(1.0f)}, n);
  EXPECT_EQ(drawn_set(counts), (std::set<TokenId>{1, 2}));
  EXPECT_NEAR(counts[1], 4.0 / 7.0 * n, tolerance(n, 4.0 / 7.0));
}

// Probabilities 0.15, 0.5, 0.05, 0.3 at ids 0..3: sorted 0.5 (id1), 0.3 (id3), 0.15 (id0),
// 0.05 (id2); cumulative 0.5, 0.8, 0.95, 1.0.
const std::vector<float> kTopPLogits = {std::log(0.15f), std::log(0.5f), std::log(0.05f),
                                        std::log(0.3f)};

TEST(SamplerTest, TopPKeepsTheSmallestNucleus) {
  struct Case {
    float top_p;
    std::set<TokenId> kept;
  };
  for (const Case& c :
       {Case{0.4f, {1}}, Case{0.75f, {1, 3}}, Case{0.85f, {0, 1, 3}}, Case{0.97f, {0, 1, 2, 3}}}) {
    SamplingParams params;
    params.top_p = c.top_p;
    Sampler sampler = make_sampler(params, 4);
    EXPECT_EQ(drawn_set(histogram(sampler, kTopPLogits, 5000)), c.kept) << c.top_p;
  }
}

TEST(SamplerTest, TopPRenormalizesOverTheNucleus) {
  // top_p = 0.75 keeps 0.5 and 0.3: p(id1) = 0.5 / 0.8 = 0.625.
  SamplingParams params;
  params.top_p = 0.75f;
  Sampler sampler = make_sampler(params, 4);
  const int n = 20000;
  std::map<TokenId, int> counts = histogram(sampler, kTopPLogits, n);
  EXPECT_NEAR(counts[1], 0.625 * n, tolerance(n, 0.625));
}

TEST(SamplerTest, TopPOnALargeVocabSortsPastTheFirstChunk) {
  // 200 tokens share logit 0 (ids 0, 5, 10, ..., 995) and 800 have -30 (weight e^-30, negligible).
  // top_p = 0.499 needs 100 of the 200 equal tokens; in canonical order (lower id first) those
  // are ids 0, 5, ..., 495. This is more than the first sorted chunk (64).
  const int32_t vocab = 1000;
  std::vector<float> logits(vocab, -30.0f);
  for (int32_t id = 0; id < vocab; id += 5) logits[id] = 0.0f;
  SamplingParams params;
  params.top_p = 0.499f;
  Sampler sampler = make_sampler(params, vocab);
  std::set<TokenId> expected;
  for (TokenId id = 0; id < 500; id += 5) expected.insert(id);
  EXPECT_EQ(drawn_set(histogram(sampler, logits, 20000)), expected);
}

TEST(SamplerTest, TopPAfterTopK) {
  // top_k = 3 keeps 0.5, 0.3, 0.15 (sum 0.95): renormalized 0.526, 0.316, 0.158; top_p = 0.8
  // then needs 0.526 + 0.316 = 0.842 >= 0.8: ids {1, 3}.
  SamplingParams params;
  params.top_k = 3;
  params.top_p = 0.8f;
  Sampler sampler = make_sampler(params, 4);
  EXPECT_EQ(drawn_set(histogram(sampler, kTopPLogits, 5000)), (std::set<TokenId>{1, 3}));
}

TEST(SamplerTest, MinPKeepsTokensAboveTheScaledMax) {
  // Weights relative to the max: id2 1.0, id0 0.5, id3 0.2, id1 0.05.
  const std::vector<float> logits = {std::log(0.5f), std::log(0.05f), std::log(1.0f),
                                     std::log(0.2f)};
  struct Case {
    float min_p;
    std::set<TokenId> kept;
  };
  for (const Case& c : {Case{0.01f, {0, 1, 2, 3}}, Case{0.1f, {0, 2, 3}}, Case{0.3f, {0, 2}},
                        Case{0.6f, {2}}, Case{1.0f, {2}}}) {
    SamplingParams params;
    params.min_p = c.min_p;
    Sampler sampler = make_sampler(params, 4);
    EXPECT_EQ(drawn_set(histogram(sampler, logits, 5000)), c.kept) << c.min_p;
  }
}

TEST(SamplerTest, MinPIsRelativeToTheTemperatureScaledMax) {
  // At T = 2 the weights become sqrt of the above: id0 0.707, id3 0.447, id1 0.224. min_p = 0.3
  // now keeps ids {0, 2, 3} (at T = 1 it kept {0, 2}).
  const std::vector<float> logits = {std::log(0.5f), std::log(0.05f), std::log(1.0f),
                                     std::log(0.2f)};
  SamplingParams params;
  params.min_p = 0.3f;
  params.temperature = 2.0f;
  Sampler sampler = make_sampler(params, 4);
  EXPECT_EQ(drawn_set(histogram(sampler, logits, 5000)), (std::set<TokenId>{0, 2, 3}));
}

TEST(SamplerTest, RepetitionPenaltyChangesTheGreedyChoice) {
  // Token 0 (2.0) seen once: 2.0 / 2 = 1.0 < 1.5, so token 1 wins.
  SamplingParams params = greedy_params();
  params.repetition_penalty = 2.0f;
  Sampler sampler = make_sampler(params, 3);
  const std::vector<float> logits = {2.0f, 1.5f, -1.0f};
  EXPECT_EQ(sampler.sample(logits, std::vector<TokenId>{0}), 1);
  EXPECT_EQ(sampler.sample(logits, std::vector<TokenId>{2}), 0);
  // Both penalized: 1.0 vs 0.75.
  EXPECT_EQ(sampler.sample(logits, std::vector<TokenId>{0, 1}), 0);
  // The caller's logits are not modified.
  EXPECT_EQ(logits, (std::vector<float>{2.0f, 1.5f, -1.0f}));
}

TEST(SamplerTest, PenaltyWindowOnlyLooksAtTheLastTokens) {
  SamplingParams params = greedy_params();
  params.presence_penalty = 1.0f;
  params.penalty_last_n = 2;
  Sampler sampler = make_sampler(params, 3);
  const std::vector<float> logits = {2.0f, 1.5f, 0.0f};
  // Token 0 is outside the last 2 tokens, so it is not penalized.
  EXPECT_EQ(sampler.sample(logits, std::vector<TokenId>{0, 2, 2}), 0);
  EXPECT_EQ(sampler.sample(logits, std::vector<TokenId>{2, 0, 2}), 1);
}

}  // namespace
}  // namespace trellis
