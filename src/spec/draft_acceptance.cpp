#include "spec/draft_acceptance.h"

#include <algorithm>
#include <cassert>

namespace trellis {
namespace {

// A draw from the (unnormalized, non-negative) weights; the last positive weight if rounding
// leaves the draw past the total.
TokenId draw(const std::vector<double>& weights, std::mt19937_64& rng) {
  double total = 0;
  for (double w : weights) total += w;
  if (total <= 0) return 0;  // no mass left (rounding): cannot happen with exact distributions
  double u = std::uniform_real_distribution<double>(0.0, total)(rng);
  TokenId last = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] <= 0) continue;
    last = static_cast<TokenId>(i);
    if (u < weights[i]) return last;
    u -= weights[i];
  }
  return last;
}

}  // namespace

DraftVerdict verify_draft_sampled(std::span<const TokenId> draft,
                                  std::span<const std::vector<float>> target_probs,
                                  std::span<const std::vector<float>> draft_probs,
                                  std::mt19937_64& rng) {
  assert(target_probs.size() == draft.size() + 1);
  assert(draft_probs.empty() || draft_probs.size() == draft.size());
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  DraftVerdict verdict;
  for (size_t i = 0; i < draft.size(); ++i) {
    const std::vector<float>& p = target_probs[i];
    const auto x = static_cast<size_t>(draft[i]);
    const double q_x = draft_probs.empty() ? 1.0 : draft_probs[i][x];
    if (q_x > 0 && uniform(rng) * q_x < p[x]) {  // kept with probability min(1, p / q)
      ++verdict.n_accepted;
      continue;
    }
    std::vector<double> residual(p.size());
    for (size_t v = 0; v < p.size(); ++v) {
      const double q_v = draft_probs.empty() ? (v == x ? 1.0 : 0.0) : draft_probs[i][v];
      residual[v] = std::max(0.0, static_cast<double>(p[v]) - q_v);
    }
    verdict.next = draw(residual, rng);
    return verdict;
  }
  const std::vector<float>& last = target_probs[draft.size()];
  verdict.next = draw(std::vector<double>(last.begin(), last.end()), rng);
  return verdict;
}

}  // namespace trellis
