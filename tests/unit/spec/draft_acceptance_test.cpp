// Draft verification with a draft distribution: the kept tokens and the next one are distributed
// as the target (a chi-square test on seeded draws, which a broken rule fails).
#include "spec/draft_acceptance.h"

#include <gtest/gtest.h>

#include <array>
#include <random>
#include <vector>

namespace trellis {
namespace {

using Rows = std::vector<std::vector<float>>;
using Tokens = std::vector<TokenId>;

constexpr int kVocab = 4;
constexpr int kDraws = 20000;
// Chi-square with 3 degrees of freedom exceeds 20 with probability 0.00017.
constexpr double kChiSquareLimit = 20.0;

double chi_square(const std::array<int, kVocab>& counts, const std::vector<float>& p) {
  double stat = 0;
  for (int v = 0; v < kVocab; ++v) {
    const double expected = kDraws * p[static_cast<size_t>(v)];
    stat += (counts[static_cast<size_t>(v)] - expected) *
            (counts[static_cast<size_t>(v)] - expected) / expected;
  }
  return stat;
}

const std::vector<float> kTarget0 = {0.1f, 0.2f, 0.3f, 0.4f};
const std::vector<float> kTarget1 = {0.25f, 0.25f, 0.25f, 0.25f};
const std::vector<float> kDraft0 = {0.4f, 0.3f, 0.2f, 0.1f};

// The first output token over kDraws verifications of one drafted token drawn from kDraft0
// (`draft_model`) or fixed at 3 (a deterministic draft); `broken` keeps every draft token.
std::array<int, kVocab> first_tokens(bool draft_model, bool broken) {
  std::mt19937_64 rng(7);
  std::discrete_distribution<int> propose(kDraft0.begin(), kDraft0.end());
  std::array<int, kVocab> counts{};
  const Rows target = {kTarget0, kTarget1};
  const Rows draft_rows = {kDraft0};
  for (int i = 0; i < kDraws; ++i) {
    const TokenId x = draft_model ? propose(rng) : 3;
    const Tokens draft = {x};
    const DraftVerdict v =
        broken ? DraftVerdict{1, 0}
               : verify_draft_sampled(draft, target, draft_model ? draft_rows : Rows{}, rng);
    ++counts[static_cast<size_t>(v.n_accepted > 0 ? x : v.next)];
  }
  return counts;
}

TEST(DraftAcceptanceTest, SampledOutputsAreDistributedAsTheTarget) {
  EXPECT_LT(chi_square(first_tokens(true, false), kTarget0), kChiSquareLimit);
  EXPECT_LT(chi_square(first_tokens(false, false), kTarget0), kChiSquareLimit);
  // The test can fail: keeping every draft token gives the draft's distribution.
  EXPECT_GT(chi_square(first_tokens(true, true), kTarget0), 1000.0);
  EXPECT_GT(chi_square(first_tokens(false, true), kTarget0), 1000.0);
}

TEST(DraftAcceptanceTest, AfterAWholeDraftTheNextTokenComesFromTheLastRow) {
  std::mt19937_64 rng(3);
  const Rows target = {{0.0f, 0.0f, 0.0f, 1.0f}, {0.0f, 1.0f, 0.0f, 0.0f}};
  const DraftVerdict v = verify_draft_sampled(Tokens{3}, target, Rows{}, rng);
  EXPECT_EQ(v.n_accepted, 1);  // p(3) = 1: always kept
  EXPECT_EQ(v.next, 1);
  // p(x) = 0: always rejected, the residual is the target without x.
  const Rows other = {{0.0f, 0.0f, 1.0f, 0.0f}, {1.0f, 0.0f, 0.0f, 0.0f}};
  const DraftVerdict w = verify_draft_sampled(Tokens{3}, other, Rows{}, rng);
  EXPECT_EQ(w.n_accepted, 0);
  EXPECT_EQ(w.next, 2);
}

}  // namespace
}  // namespace trellis
