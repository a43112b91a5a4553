// Verifying a draft that comes with its draft distribution (a draft model that samples): which of
// the k draft tokens are kept and which token comes after them, so that the output is distributed
// exactly as without speculation. The engine verifies deterministic drafts (the prefix cache,
// n-grams, a greedy draft model) by sampling the target's rows in order with the request's own
// sampler while the samples are the draft's (engine/engine.cpp): the same rule with one-hot q,
// with the RNG draws of plain decoding.
//
// The standard rule: draft token x_i, proposed with probability q_i(x_i), is kept with
// probability min(1, p_i(x_i) / q_i(x_i)); at the first rejection the next token is drawn from the
// residual max(0, p_i - q_i), normalized; when all are kept, from p_k. The kept tokens and the
// next one are then distributed exactly as tokens drawn from p one at a time. A draft from the
// prefix cache or an n-gram is deterministic: q_i is one-hot on x_i (pass no draft
// distributions), so x_i is kept with probability p_i(x_i) and the residual is p_i without x_i.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "base/token_id.h"

namespace trellis {

struct DraftVerdict {
  int32_t n_accepted = 0;  // draft tokens kept, a prefix of the draft
  TokenId next = 0;        // the token after them
};

// target_probs: k + 1 rows of probabilities; draft_probs: k rows, or none for a deterministic
// draft. Preconditions: rows of the vocabulary's size, each summing to ~1.
DraftVerdict verify_draft_sampled(std::span<const TokenId> draft,
                                  std::span<const std::vector<float>> target_probs,
                                  std::span<const std::vector<float>> draft_probs,
                                  std::mt19937_64& rng);

}  // namespace trellis
