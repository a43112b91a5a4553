// Finds the text of special tokens (CONTROL and USER_DEFINED) in input text, so that they become
// those tokens instead of being tokenized as ordinary text.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"

namespace trellis {

class SpecialTokenSplitter {
 public:
  // One stretch of the input: a special token, or plain text to tokenize normally.
  struct Fragment {
    TokenId token;          // kNoToken for plain text
    std::string_view text;  // the token's text or the plain text; never empty
  };

  // `vocab` must outlive the splitter (it keeps views of the token texts).
  explicit SpecialTokenSplitter(const Vocab& vocab);

  // Splits `text` into fragments, in order; their texts concatenate to `text`.
  // USER_DEFINED tokens are always recognized (HF splits added tokens before anything else, and
  // tokenizers such as MPT's rely on it for whitespace runs); CONTROL tokens only when
  // `include_control`. Scanning left to right, the longest token starting at a position wins.
  // Cost: O(text length x distinct token lengths) in the worst case.
  std::vector<Fragment> split(std::string_view text, bool include_control) const;

  bool empty() const { return tokens_.empty(); }

 private:
  struct Entry {
    TokenId id;
    bool control;  // recognized only when control tokens are asked for
  };
  std::unordered_map<std::string_view, Entry> tokens_;  // text -> token
  std::vector<size_t> lengths_;                         // distinct text lengths, longest first
  std::array<bool, 256> first_bytes_{};                 // bytes some token text starts with
};

}  // namespace trellis
