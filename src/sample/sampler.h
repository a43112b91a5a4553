// Turns one row of logits into the next token, following a request's SamplingParams.
//
// The pipeline, in this order (each step is skipped when its parameter is neutral):
//   1. penalties    repetition, frequency and presence, over the last penalty_last_n tokens of
//                   `history` (see SamplingParams for the formulas)
//   2. greedy       temperature == 0: return the argmax; ties go to the lowest token id
//   3. top-k        keep the k highest logits (ties at the boundary: lower id kept)
//   4. temperature  logits divided by temperature ...
//   5. softmax      ... and normalized over the remaining tokens; 4 and 5 are computed together as
//                   exp((logit - max) / temperature), which stays finite for any temperature > 0
//   6. top-p        keep the most probable tokens up to cumulative probability >= top_p
//   7. min-p        keep tokens with probability >= min_p * (largest probability)
//   8. draw         one uniform double from the seeded Rng, inverse CDF over the kept tokens
//
// Reproducibility: a sampler consumes exactly one Rng draw per non-greedy sample() call and none
// for greedy ones, and every step works on a canonical order of candidates (token id order, or
// sorted by (logit descending, id ascending)), so the same seed, logits and history give the same
// tokens with any standard library. Only std::exp is taken from the platform.
//
// NaN logits are treated as -inf and +inf as the largest float, so that sorting stays well defined.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/result.h"
#include "base/token_id.h"
#include "sample/rng.h"
#include "sample/sampling_params.h"

namespace trellis {

class Sampler {
 public:
  // Errors: invalid params (as validate() says), vocab_size <= 0.
  static Result<Sampler> create(const SamplingParams& params, int32_t vocab_size);

  // Chooses the next token. `logits` has exactly vocab_size entries; `history` holds the tokens so
  // far (the caller decides whether the prompt is part of it), every id in [0, vocab_size).
  // Does not allocate: all buffers are sized at construction.
  TokenId sample(std::span<const float> logits, std::span<const TokenId> history);

  // Restarts the random stream as if the sampler had just been created with `seed`.
  void reseed(uint64_t seed) { rng_.reseed(seed); }

  const SamplingParams& params() const { return params_; }
  int32_t vocab_size() const { return vocab_size_; }

 private:
  struct Candidate {
    TokenId id;
    float logit;   // after penalties; temperature is applied to the weight only
    float weight;  // exp((logit - max) / temperature) in (0, 1], 1 for the max; set in step 5
  };

  Sampler(const SamplingParams& params, int32_t vocab_size);

  void load_logits(std::span<const float> logits);
  TokenId argmax() const;  // over logits_
  // Steps 3..7 on logits_: fills candidates_ and moves the kept ones to the front; returns how
  // many are kept.
  size_t filter_candidates();
  size_t keep_top_p(size_t n_candidates, double total_weight, size_t sorted_end);
  TokenId draw(size_t n_candidates);

  SamplingParams params_;
  int32_t vocab_size_;
  Rng rng_;
  // [vocab_size]; this call's logits after sanitizing and penalties, indexed by token id.
  std::vector<float> logits_;
  // [vocab_size], empty for greedy; filled from logits_ in id order, then reordered and cut by the
  // filters.
  std::vector<Candidate> candidates_;
  // [vocab_size] when penalties are on; scratch for apply_penalties(), all zero between calls.
  std::vector<int32_t> counts_;
};

}  // namespace trellis
