#include "spec/draft_length.h"

#include <algorithm>
#include <cmath>

namespace trellis {
namespace {

constexpr double kMostLikelyKept = 0.9;

}  // namespace

int32_t DraftLength::next(int32_t n_decoding, const StepCost& cost) {
  // Each decoding sequence's share of the rows beyond the decode tokens.
  const int32_t n = std::max(1, n_decoding);
  const int32_t room = (config_.max_step_rows - n) / n;
  if (room <= 0) return 0;
  if (acceptance_ < config_.min_acceptance) {
    if (++steps_without_draft_ < config_.probe_interval) return 0;
    // A probe, where a hit would pay: a step one row per sequence longer costs less than two.
    if (config_.weigh_step_cost && cost.known() &&
        cost.estimate_ms(2 * n) >= 2 * cost.estimate_ms(n)) {
      return 0;
    }
    steps_without_draft_ = 0;
    return 1;  // (room >= 1 here)
  }
  // Expected accepted run of a geometric acceptance: a / (1 - a) tokens, plus the one verified.
  const double run = acceptance_ >= 1.0 ? config_.max_tokens : 1.0 / (1.0 - acceptance_);
  const int32_t length =
      std::min(room, std::clamp(static_cast<int32_t>(std::lround(run)), 1, config_.max_tokens));
  return config_.weigh_step_cost && cost.known() ? cheapest_per_token(length, n, cost) : length;
}

int32_t DraftLength::cheapest_per_token(int32_t longest, int32_t n, const StepCost& cost) const {
  int32_t best = 0;
  double best_rate = 0;
  double expected = 1;  // tokens per sequence: its decode token and the draft tokens kept
  double kept = 1;      // the probability that draft token k is kept
  // No draft counts as surer than this: a sequence's first drafts are hopeful guesses, and a
  // wrong one in a compute-bound step costs a step's worth of time.
  const double acceptance = std::min(acceptance_, kMostLikelyKept);
  for (int32_t k = 0; k <= longest; ++k) {
    if (k > 0) {
      kept *= acceptance;
      expected += kept;
    }
    const double ms = cost.estimate_ms(n * (1 + k));
    if (ms <= 0) return longest;  // nothing measured lately
    const double rate = expected / ms;
    if (rate > best_rate) {
      best_rate = rate;
      best = k;
    }
  }
  return best;
}

void DraftLength::record(int32_t drafted, int32_t accepted) {
  if (drafted <= 0) return;
  const double rate = static_cast<double>(std::clamp(accepted, 0, drafted)) / drafted;
  acceptance_ = config_.decay * acceptance_ + (1.0 - config_.decay) * rate;
}

}  // namespace trellis
