// Per-sequence text output and stop decision: each generated token goes in, the text that may be
// shown (streamed) comes out, and the matcher says when and why generation ended.
//
// Composition: tokens -> StreamDecoder (holds back incomplete UTF-8) -> StopStringMatcher (holds
// back possible starts of stop strings) -> output. Concatenating every Step::text of a sequence
// gives its final text, so a streaming and a non-streaming response agree.
//
// Checks per token, in this order (as vLLM does): stop token, stop string, max_tokens. When the
// sequence ends for a reason other than a stop string, the held-back text is released (after a
// last look for a stop string in it), with an incomplete UTF-8 tail as U+FFFD.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "sample/stop_condition.h"
#include "sample/stop_string_matcher.h"
#include "tokenizer/tokenizer.h"

namespace trellis {

class StopMatcher {
 public:
  struct Step {
    std::string text;  // valid UTF-8, possibly empty
    FinishReason finish_reason = FinishReason::NONE;

    bool finished() const { return finish_reason != FinishReason::NONE; }
  };

  // Precondition: condition.validate() is ok. `tokenizer` must outlive the matcher. The text of
  // `spelled` control tokens is output (StreamDecoder).
  StopMatcher(const StopCondition& condition, const Tokenizer& tokenizer,
              std::vector<TokenId> spelled = {});

  // Feeds the next generated token. Precondition: !finished().
  Step push(TokenId id);
  // The same, appending the text to `text` and returning the finish reason (NONE: not finished).
  // Allocates nothing once `text` has room (the engine reuses one buffer per request).
  FinishReason push(TokenId id, std::string& text);

  // Ends the sequence from outside (cancel, context full): releases the held-back text. The
  // finish reason becomes `reason` unless the released text completes a stop string (then STOP).
  Step finish(FinishReason reason);
  FinishReason finish(FinishReason reason, std::string& text);

  bool finished() const { return finish_reason_ != FinishReason::NONE; }
  FinishReason finish_reason() const { return finish_reason_; }
  // Tokens pushed so far (stop tokens included).
  int32_t n_tokens() const { return n_tokens_; }
  // The stop string that ended the sequence (index into StopCondition::stop_strings), if any.
  std::optional<size_t> matched_stop_string() const { return strings_.matched_index(); }

 private:
  StopCondition condition_;
  StreamDecoder decoder_;
  StopStringMatcher strings_;
  // The decoder's output on its way to the stop strings, reused token after token: sized once for
  // the most one token can decode to (with the bytes the decoder held back before it).
  std::string decoded_;
  int32_t n_tokens_ = 0;
  FinishReason finish_reason_ = FinishReason::NONE;
};

}  // namespace trellis
