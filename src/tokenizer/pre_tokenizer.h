// Pre-tokenization for byte-level BPE: splits text into the pieces ("words") that BPE merges
// never cross, using the regex list of the vocab's `tokenizer.ggml.pre` type.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace trellis {

class PreTokenizer {
 public:
  // The regex list of a `tokenizer.ggml.pre` value ("llama-bpe", "qwen2", "gpt-2", ...).
  // Errors: a pre type this engine does not know (the message names it).
  static Result<PreTokenizer> for_pre_type(std::string_view pre_type);

  // Patterns are PCRE2 syntax, compiled with UTF and UCP (\s, \w, \d are Unicode-aware).
  // Errors: a pattern that does not compile (the message names it and PCRE2's reason).
  static Result<PreTokenizer> from_patterns(std::span<const std::string_view> patterns);

  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Splits `text` into non-empty pieces whose concatenation is `text`, in order. Each pattern in
  // turn splits every piece the previous one produced (the first one splits the whole text):
  // each match becomes a piece and so does each stretch between matches (HF's Split with
  // behavior Isolated). A pattern sees one piece as its whole subject, so anchors and lookaheads
  // stop at the piece's ends.
  // Bytes that are not valid UTF-8 become pieces of one byte each that no pattern splits
  // further, so any input is split losslessly.
  // Thread-safe: may be called concurrently on one PreTokenizer.
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  class Pattern;  // one compiled PCRE2 pattern (defined in the .cpp; owns the pcre2_code)
  explicit PreTokenizer(std::vector<std::unique_ptr<Pattern>> patterns);

  std::vector<std::unique_ptr<Pattern>> patterns_;
};

// The pre types for_pre_type accepts, for messages and tests.
std::vector<std::string> known_pre_types();

}  // namespace trellis
