#include "sample/sampling_params.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace trellis {
namespace {

std::string show(float value) {
  // std::to_string prints 6 decimals, which would show 1e-9 as 0.000000.
  char text[32];
  std::snprintf(text, sizeof(text), "%g", static_cast<double>(value));
  return text;
}

}  // namespace

// Comparisons are written so that NaN fails them (every comparison with NaN is false).
Status SamplingParams::validate() const {
  if (!(temperature >= 0.0f) || std::isinf(temperature)) {
    return Error{"temperature must be a finite number >= 0 (0 = greedy), got " + show(temperature)};
  }
  if (top_k < 0) {
    return Error{"top_k must be >= 0 (0 = off), got " + std::to_string(top_k)};
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    return Error{"top_p must be in (0, 1] (1 = off), got " + show(top_p)};
  }
  if (!(min_p >= 0.0f && min_p <= 1.0f)) {
    return Error{"min_p must be in [0, 1] (0 = off), got " + show(min_p)};
  }
  if (!(repetition_penalty > 0.0f) || std::isinf(repetition_penalty)) {
    return Error{"repetition_penalty must be a finite number > 0 (1 = off), got " +
                 show(repetition_penalty)};
  }
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
    return Error{"frequency_penalty must be in [-2, 2] (0 = off), got " + show(frequency_penalty)};
  }
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) {
    return Error{"presence_penalty must be in [-2, 2] (0 = off), got " + show(presence_penalty)};
  }
  if (penalty_last_n < -1) {
    return Error{"penalty_last_n must be >= -1 (-1 = whole history, 0 = off), got " +
                 std::to_string(penalty_last_n)};
  }
  return ok_status();
}

}  // namespace trellis
