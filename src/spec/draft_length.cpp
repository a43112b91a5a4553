#include "spec/draft_length.h"

#include <algorithm>
#include <cmath>

namespace trellis {

int32_t DraftLength::next(int32_t n_decoding) {
  // Each decoding sequence's share of the rows beyond the decode tokens.
  const int32_t n = std::max(1, n_decoding);
  const int32_t room = (config_.max_step_rows - n) / n;
  if (room <= 0) return 0;
  if (acceptance_ < config_.min_acceptance) {
    if (++steps_without_draft_ < config_.probe_interval) return 0;
    steps_without_draft_ = 0;
    return 1;  // a probe (room >= 1 here)
  }
  // Expected accepted run of a geometric acceptance: a / (1 - a) tokens, plus the one verified.
  const double run = acceptance_ >= 1.0 ? config_.max_tokens : 1.0 / (1.0 - acceptance_);
  return std::min(room, std::clamp(static_cast<int32_t>(std::lround(run)), 1, config_.max_tokens));
}

void DraftLength::record(int32_t drafted, int32_t accepted) {
  if (drafted <= 0) return;
  const double rate = static_cast<double>(std::clamp(accepted, 0, drafted)) / drafted;
  acceptance_ = config_.decay * acceptance_ + (1.0 - config_.decay) * rate;
}

}  // namespace trellis
