// When generation of one sequence ends, and why (OpenAI's finish_reason).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/token_id.h"

namespace trellis {

enum class FinishReason {
  NONE,       // still generating
  STOP,       // a stop token (EOS, end of turn, ...) or a stop string
  LENGTH,     // max_tokens generated, or the context is full
  CANCELLED,  // the caller cancelled it (or the engine shut down first)
  ERROR,      // it could not run (the request's error says why)
};

// "stop", "length" (OpenAI's spelling), "cancelled" or "error". NONE has no spelling (JSON null);
// precondition: not NONE.
std::string_view finish_reason_name(FinishReason reason);

// An immutable value per request, checked once with validate().
struct StopCondition {
  // Generation stops after any of these tokens (the vocab's EOS, chat end-of-turn tokens, the
  // request's stop_token_ids); the token's own text is never emitted. Empty for ignore_eos.
  std::vector<TokenId> stop_token_ids;
  // Generation stops once this many tokens were generated (stop tokens included). nullopt = no
  // limit here (the engine still ends at the context size). Range: >= 1.
  std::optional<int32_t> max_tokens;
  // Generation stops when the decoded text contains one of these; the text before it is emitted,
  // the stop string itself and anything after it are not. Each must be non-empty valid UTF-8.
  std::vector<std::string> stop_strings;

  Status validate() const;

  bool is_stop_token(TokenId id) const;
};

}  // namespace trellis
