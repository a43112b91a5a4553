#include "sample/penalties.h"

#include <cassert>
#include <cfloat>

namespace trellis {

// Two passes over the window: count, then apply once per distinct token (at its first occurrence)
// and reset its count, which restores the all-zero invariant of `counts`.
void apply_penalties(const SamplingParams& params, std::span<const TokenId> history,
                     std::span<float> logits, std::span<int32_t> counts) {
  assert(counts.size() == logits.size());
  if (!params.has_penalties()) return;
  std::span<const TokenId> window = history;
  if (params.penalty_last_n >= 0 && window.size() > static_cast<size_t>(params.penalty_last_n)) {
    window = window.last(static_cast<size_t>(params.penalty_last_n));
  }
  const size_t vocab_size = logits.size();
  auto in_vocab = [vocab_size](TokenId id) {
    const bool ok = id >= 0 && static_cast<size_t>(id) < vocab_size;
    assert(ok && "history token outside the vocab");
    return ok;
  };
  for (TokenId id : window) {
    if (in_vocab(id)) ++counts[static_cast<size_t>(id)];
  }
  const float repetition = params.repetition_penalty;
  for (TokenId id : window) {
    if (!in_vocab(id)) continue;
    int32_t& count = counts[static_cast<size_t>(id)];
    if (count == 0) continue;  // applied at an earlier occurrence
    float& logit = logits[static_cast<size_t>(id)];
    logit = logit > 0.0f ? logit / repetition : logit * repetition;
    logit -= static_cast<float>(count) * params.frequency_penalty + params.presence_penalty;
    // Dividing a huge logit by a penalty < 1 can overflow; +inf would break the sampler's
    // max-subtraction (inf - inf = NaN).
    if (logit > FLT_MAX) logit = FLT_MAX;
    count = 0;
  }
}

}  // namespace trellis
