// Repetition (llama.cpp), frequency and presence (OpenAI) penalties on a row of logits.
#pragma once

#include <cstdint>
#include <span>

#include "base/token_id.h"
#include "sample/sampling_params.h"

namespace trellis {

// For every distinct token t in the last params.penalty_last_n tokens of `history` (all of it for
// -1), seen `count` times there:
//   logit[t] = logit[t] > 0 ? logit[t] / repetition_penalty : logit[t] * repetition_penalty
//   logit[t] -= count * frequency_penalty + presence_penalty
// Other logits are untouched; a result above FLT_MAX is clamped to FLT_MAX. History ids outside [0,
// logits.size()) are a programmer error (asserted; ignored in release builds). `counts` is scratch
// of logits.size() entries that is all zero on entry and again on return; it lets the call run
// without allocating in O(window) time, independent of the vocab size.
void apply_penalties(const SamplingParams& params, std::span<const TokenId> history,
                     std::span<float> logits, std::span<int32_t> counts);

}  // namespace trellis
