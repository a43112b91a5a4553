// Prompt lookup drafts: the tokens after the latest earlier occurrence of the longest suffix.
#include "spec/prompt_lookup.h"

#include <gtest/gtest.h>

#include <vector>

namespace trellis {
namespace {

using Tokens = std::vector<TokenId>;

Tokens lookup(const Tokens& history, const PromptLookupConfig& config) {
  Tokens draft{99, 99};  // stale contents are replaced
  prompt_lookup_draft(history, config, draft);
  return draft;
}

TEST(PromptLookupTest, TheLongestSuffixWithAnEarlierOccurrenceGivesTheDraft) {
  const PromptLookupConfig config{2, 4, 3};
  // "1 2 3" occurred at 0, followed by 4 5 6: the draft is 4 5 6 (three tokens at most).
  EXPECT_EQ(lookup(Tokens{1, 2, 3, 4, 5, 6, 7, 9, 1, 2, 3}, config), (Tokens{4, 5, 6}));
  // The longest suffix wins over a later, shorter one: "7 8 9" (n = 3) occurred once, "8 9"
  // also later.
  EXPECT_EQ(lookup(Tokens{7, 8, 9, 10, 11, 0, 8, 9, 12, 7, 8, 9}, config), (Tokens{10, 11, 0}));
  // Among occurrences of the same suffix, the latest.
  EXPECT_EQ(lookup(Tokens{5, 6, 1, 5, 6, 2, 5, 6}, config), (Tokens{2, 5, 6}));
  // A draft stops at the history's end: what followed is all there is.
  EXPECT_EQ(lookup(Tokens{3, 4, 3, 4}, config), (Tokens{3, 4}));
}

TEST(PromptLookupTest, NoDraftWithoutAnEarlierOccurrenceOfTheShortestSuffix) {
  const PromptLookupConfig config{2, 4, 8};
  EXPECT_TRUE(lookup(Tokens{1, 2, 3, 4, 5}, config).empty());
  EXPECT_TRUE(lookup(Tokens{}, config).empty());
  EXPECT_TRUE(lookup(Tokens{7}, config).empty());
  // A single repeated token is below min_ngram 2 ...
  EXPECT_TRUE(lookup(Tokens{9, 1, 2, 9}, config).empty());
  // ... and found with min_ngram 1.
  EXPECT_EQ(lookup(Tokens{9, 1, 2, 9}, PromptLookupConfig{1, 4, 8}), (Tokens{1, 2, 9}));
}

}  // namespace
}  // namespace trellis
