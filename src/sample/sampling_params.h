// How the next token is chosen from a row of logits: one immutable value per request, checked once
// with validate() when the request arrives (bad values are a user error, not a programmer error).
#pragma once

#include <cstdint>

#include "base/result.h"

namespace trellis {

// Every field has a neutral value that switches its step off; the defaults are all neutral except
// temperature, so a default-constructed value samples from the plain softmax.
// The order in which the steps are applied is documented in sampler.h.
struct SamplingParams {
  // 0 = greedy (argmax after penalties); otherwise logits are divided by it. Range: [0, inf).
  float temperature = 1.0f;
  // Keep only the k highest logits. 0 = off; values above the vocab size keep everything.
  int32_t top_k = 0;
  // Nucleus: keep the smallest set of most probable tokens whose probability adds up to at least
  // top_p. Range: (0, 1]; 1 = off.
  float top_p = 1.0f;
  // Keep tokens whose probability is at least min_p times that of the most probable token.
  // Range: [0, 1]; 0 = off.
  float min_p = 0.0f;
  // llama.cpp semantics: a logit of a token seen in the window is divided by this when positive
  // and multiplied by it when negative (or zero). Range: (0, inf); 1 = off.
  float repetition_penalty = 1.0f;
  // OpenAI semantics, for a token seen `count` times in the window:
  //   logit -= count * frequency_penalty + (count > 0 ? presence_penalty : 0)
  // Range: [-2, 2] each (OpenAI's documented range); 0 = off.
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  // The penalties look at the last penalty_last_n tokens of the history. -1 = the whole history,
  // 0 = no token (penalties off). Range: [-1, inf).
  int32_t penalty_last_n = 64;
  // The draws are a pure function of (seed, logits, history) sequence. A caller that wants
  // "random" sampling picks a fresh seed itself; derive_seed() (rng.h) gives one per parallel
  // sample.
  uint64_t seed = 0;

  // An error naming the first field that is out of range (NaN counts as out of range).
  Status validate() const;

  bool is_greedy() const { return temperature == 0.0f; }
  bool has_penalties() const {
    return penalty_last_n != 0 &&
           (repetition_penalty != 1.0f || frequency_penalty != 0.0f || presence_penalty != 0.0f);
  }
};

}  // namespace trellis
