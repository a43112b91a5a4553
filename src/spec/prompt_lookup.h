// Drafts for speculative decoding from the sequence itself (prompt lookup): code edits,
// summaries and answers grounded in a document copy spans of their input, so the tokens that
// followed the latest earlier occurrence of the sequence's last few tokens are a good guess of
// what comes next.
//
//   history:  ... a b c d e ... x a b c   ->  n = 3: "a b c" occurred before, followed by
//                                              "d e ...": the draft is d e ... (max_tokens long)
//
// The longest n in [min_ngram, max_ngram] with an earlier occurrence wins; among occurrences of
// that n, the latest (the most recent context is the likeliest to repeat). A draft never reaches
// past the history (it is what followed the occurrence, up to the current end).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/token_id.h"

namespace trellis {

struct PromptLookupConfig {
  int32_t min_ngram = 2;   // the shortest suffix worth matching (1 guesses too often)
  int32_t max_ngram = 4;   // the longest suffix tried first
  int32_t max_tokens = 8;  // the draft's length at most
};

// The draft for `history` (prompt and generated tokens so far), into `draft` (its capacity
// reused); empty when no suffix of at least min_ngram tokens occurred before.
// O(history size x max_ngram).
void prompt_lookup_draft(std::span<const TokenId> history, const PromptLookupConfig& config,
                         std::vector<TokenId>& draft);

}  // namespace trellis
