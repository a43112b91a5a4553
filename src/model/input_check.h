// Whether a model may take an input of tokens: not empty, within its context, every token in its
// vocab. The error says what is wrong, for the caller to prefix with which input it was.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "base/result.h"
#include "base/token_id.h"

namespace trellis {

inline Status check_input_tokens(std::span<const TokenId> input, int64_t n_ctx, int64_t n_vocab) {
  if (input.empty()) return Error{"is empty"};
  if (static_cast<int64_t>(input.size()) > n_ctx) {
    return Error{"has " + std::to_string(input.size()) +
                 " tokens, more than the model's context of " + std::to_string(n_ctx)};
  }
  for (TokenId t : input) {
    if (t < 0 || t >= n_vocab) {
      return Error{"has token " + std::to_string(t) + ", outside the vocab of " +
                   std::to_string(n_vocab)};
    }
  }
  return {};
}

}  // namespace trellis
