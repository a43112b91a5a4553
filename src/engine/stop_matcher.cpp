#include "engine/stop_matcher.h"

#include <cassert>

namespace trellis {

StopMatcher::StopMatcher(const StopCondition& condition, const Tokenizer& tokenizer,
                         std::vector<TokenId> spelled)
    : condition_(condition),
      decoder_(tokenizer, std::move(spelled)),
      strings_(condition.stop_strings) {
  assert(condition.validate().ok());
  decoded_.reserve(tokenizer.max_decoded_bytes() + 16);
}

StopMatcher::Step StopMatcher::push(TokenId id) {
  Step step;
  step.finish_reason = push(id, step.text);
  return step;
}

FinishReason StopMatcher::push(TokenId id, std::string& text) {
  assert(!finished());
  if (finished()) return FinishReason::NONE;
  ++n_tokens_;
  if (condition_.is_stop_token(id)) return finish(FinishReason::STOP, text);

  decoder_.push(id, decoded_);
  strings_.push(decoded_, text);
  decoded_.clear();
  if (strings_.stopped()) {
    finish_reason_ = FinishReason::STOP;
    return finish_reason_;
  }
  if (condition_.max_tokens.has_value() && n_tokens_ >= *condition_.max_tokens) {
    return finish(FinishReason::LENGTH, text);
  }
  return FinishReason::NONE;
}

StopMatcher::Step StopMatcher::finish(FinishReason reason) {
  Step step;
  step.finish_reason = finish(reason, step.text);
  return step;
}

FinishReason StopMatcher::finish(FinishReason reason, std::string& text) {
  assert(reason != FinishReason::NONE);
  if (finished()) return FinishReason::NONE;
  // The decoder's tail is the last text of the sequence; it can still complete a stop string.
  decoder_.flush(decoded_);
  strings_.push(decoded_, text);
  decoded_.clear();
  if (strings_.stopped()) {
    reason = FinishReason::STOP;
  } else {
    strings_.flush(text);
  }
  finish_reason_ = reason;
  return reason;
}

}  // namespace trellis
