#include "sample/stop_condition.h"

#include <algorithm>
#include <cassert>

#include "base/utf8.h"

namespace trellis {

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::STOP:
      return "stop";
    case FinishReason::LENGTH:
      return "length";
    case FinishReason::CANCELLED:
      return "cancelled";
    case FinishReason::ERROR:
      return "error";
    case FinishReason::NONE:
      break;
  }
  assert(false && "FinishReason::NONE has no name");
  return "";
}

Status StopCondition::validate() const {
  if (max_tokens.has_value() && *max_tokens < 1) {
    return Error{"max_tokens must be >= 1, got " + std::to_string(*max_tokens)};
  }
  for (TokenId id : stop_token_ids) {
    if (id < 0) return Error{"stop token ids must be >= 0, got " + std::to_string(id)};
  }
  for (size_t i = 0; i < stop_strings.size(); ++i) {
    if (stop_strings[i].empty()) {
      return Error{"stop string " + std::to_string(i) + " is empty"};
    }
    if (!is_valid_utf8(stop_strings[i])) {
      return Error{"stop string " + std::to_string(i) + " is not valid UTF-8"};
    }
  }
  return ok_status();
}

bool StopCondition::is_stop_token(TokenId id) const {
  return std::find(stop_token_ids.begin(), stop_token_ids.end(), id) != stop_token_ids.end();
}

}  // namespace trellis
