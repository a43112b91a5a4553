// Log-probabilities for OpenAI's `logprobs` / `top_logprobs`: a log-softmax over the full vocab of
// the raw logits (before penalties, temperature and filters, as vLLM reports by default).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/token_id.h"

namespace trellis {

struct TokenLogprob {
  TokenId id = kNoToken;
  float logprob = 0.0f;  // natural log, <= 0; -inf for a token with a -inf (or NaN) logit

  friend bool operator==(const TokenLogprob&, const TokenLogprob&) = default;
};

struct Logprobs {
  TokenLogprob chosen;
  // The min(n_top, vocab) most probable tokens, most probable first; equal logprobs in id order.
  std::vector<TokenLogprob> top;
};

// log(sum(exp(logits))), computed as max + log(sum(exp(logit - max))) in double so that it neither
// overflows nor loses small terms. NaN logits count as -inf. -inf when every logit is -inf.
double log_sum_exp(std::span<const float> logits);

// The chosen token's logprob and the n_top best alternatives. Preconditions: logits non-empty,
// chosen in [0, logits.size()), n_top >= 0. Costs one pass over the vocab plus O(V log n_top).
Logprobs compute_logprobs(std::span<const float> logits, TokenId chosen, int32_t n_top);

}  // namespace trellis
