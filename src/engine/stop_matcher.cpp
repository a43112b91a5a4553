#include "engine/stop_matcher.h"

#include <cassert>

namespace trellis {

StopMatcher::StopMatcher(const StopCondition& condition, const Tokenizer& tokenizer)
    : condition_(condition), decoder_(tokenizer), strings_(condition.stop_strings) {
  assert(condition.validate().ok());
}

StopMatcher::Step StopMatcher::push(TokenId id) {
  assert(!finished());
  Step step;
  if (finished()) return step;
  ++n_tokens_;
  if (condition_.is_stop_token(id)) return finish(FinishReason::STOP);

  step.text = strings_.push(decoder_.push(id));
  if (strings_.stopped()) {
    finish_reason_ = FinishReason::STOP;
    step.finish_reason = finish_reason_;
    return step;
  }
  if (condition_.max_tokens.has_value() && n_tokens_ >= *condition_.max_tokens) {
    Step last = finish(FinishReason::LENGTH);
    step.text += last.text;
    step.finish_reason = last.finish_reason;
  }
  return step;
}

StopMatcher::Step StopMatcher::finish(FinishReason reason) {
  assert(reason != FinishReason::NONE);
  Step step;
  if (finished()) return step;
  // The decoder's tail is the last text of the sequence; it can still complete a stop string.
  step.text = strings_.push(decoder_.flush());
  if (strings_.stopped()) {
    reason = FinishReason::STOP;
  } else {
    step.text += strings_.flush();
  }
  finish_reason_ = reason;
  step.finish_reason = reason;
  return step;
}

}  // namespace trellis
