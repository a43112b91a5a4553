// StopStringMatcher: held-back text, stops across pushes, partial matches released intact,
// several stop strings, UTF-8, and the same result however the text is split.
#include "sample/stop_string_matcher.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/utf8.h"
#include "sample/rng.h"

namespace trellis {
namespace {

// Pushes each piece, collecting every output; then flushes unless a stop string was found.
std::vector<std::string> run(StopStringMatcher& matcher, const std::vector<std::string>& pieces) {
  std::vector<std::string> outputs;
  for (const std::string& piece : pieces) outputs.push_back(matcher.push(piece));
  if (!matcher.stopped()) outputs.push_back(matcher.flush());
  return outputs;
}

std::string joined(const std::vector<std::string>& outputs) {
  std::string all;
  for (const std::string& out : outputs) all += out;
  return all;
}

TEST(StopStringMatcherTest, NoStopStringsPassesEverythingThrough) {
  StopStringMatcher matcher({});
  EXPECT_EQ(run(matcher, {"ab", "c", ""}), (std::vector<std::string>{"ab", "c", "", ""}));
  EXPECT_FALSE(matcher.stopped());
}

TEST(StopStringMatcherTest, StopAcrossPushes) {
  StopStringMatcher matcher({"###"});
  EXPECT_EQ(matcher.push("Hello #"), "Hello ");
  EXPECT_EQ(matcher.held_bytes(), 1u);
  EXPECT_EQ(matcher.push("#"), "");
  EXPECT_EQ(matcher.held_bytes(), 2u);
  EXPECT_FALSE(matcher.stopped());
  EXPECT_EQ(matcher.push("# world"), "");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.matched_index(), 0u);
  EXPECT_EQ(matcher.push("more"), "");
}

TEST(StopStringMatcherTest, TextBeforeTheStopInTheSamePushIsReleased) {
  StopStringMatcher matcher({"STOP"});
  EXPECT_EQ(matcher.push("abc ST"), "abc ");
  EXPECT_EQ(matcher.push("xy STOP tail"), "STxy ");
  EXPECT_TRUE(matcher.stopped());
}

TEST(StopStringMatcherTest, PartialMatchThatFailsIsReleasedIntact) {
  StopStringMatcher matcher({"###"});
  EXPECT_EQ(matcher.push("a #"), "a ");
  EXPECT_EQ(matcher.push("#b"), "##b");
  EXPECT_FALSE(matcher.stopped());
  EXPECT_EQ(matcher.push("c##"), "c");
  EXPECT_EQ(matcher.flush(), "##");  // end of stream: held text is ordinary output
  EXPECT_FALSE(matcher.stopped());
}

TEST(StopStringMatcherTest, OverlappingPrefixesKeepTheRightSuffix) {
  // "aaab" contains "aab" starting at 1; after "aaa" only the last "aa" may still start it.
  StopStringMatcher matcher({"aab"});
  EXPECT_EQ(run(matcher, {"a", "a", "a", "b"}), (std::vector<std::string>{"", "", "a", ""}));
  EXPECT_TRUE(matcher.stopped());
}

TEST(StopStringMatcherTest, StopAtTheVeryStart) {
  StopStringMatcher matcher({"STOP"});
  EXPECT_EQ(matcher.push("STOP and more"), "");
  EXPECT_TRUE(matcher.stopped());
  StopStringMatcher split({"STOP"});
  EXPECT_EQ(run(split, {"S", "TO", "P!"}), (std::vector<std::string>{"", "", ""}));
  EXPECT_TRUE(split.stopped());
}

TEST(StopStringMatcherTest, SeveralStopStringsFirstToEndWins) {
  // "lo w" ends (at byte 7) before "world" (byte 11).
  StopStringMatcher matcher({"world", "lo w"});
  EXPECT_EQ(matcher.push("hello world"), "hel");
  EXPECT_EQ(matcher.matched_index(), 1u);
}

TEST(StopStringMatcherTest, SameEndEarliestStartWins) {
  // "b c" and "c" both end at byte 4 of "ab cd": cut before "b c".
  StopStringMatcher matcher({"c", "b c"});
  EXPECT_EQ(matcher.push("ab cd"), "a");
  EXPECT_EQ(matcher.matched_index(), 1u);
}

TEST(StopStringMatcherTest, HoldsTheLongestPossibleStart) {
  StopStringMatcher matcher({"<end>", "<e"});
  // "<e" completes first.
  EXPECT_EQ(run(matcher, {"x<", "en"}), (std::vector<std::string>{"x", ""}));
  EXPECT_EQ(matcher.matched_index(), 1u);
  StopStringMatcher other({"<end>", "</s>"});
  EXPECT_EQ(run(other, {"x<", "/", "p>"}), (std::vector<std::string>{"x", "", "</p>", ""}));
}

TEST(StopStringMatcherTest, EmptyStopStringsAreIgnored) {
  StopStringMatcher matcher({"", "x"});
  EXPECT_EQ(matcher.push("abxc"), "ab");
  EXPECT_EQ(matcher.matched_index(), 1u);
}

TEST(StopStringMatcherTest, MultiByteStopStrings) {
  // "日本" in a stream of whole characters; everything released is valid UTF-8.
  StopStringMatcher matcher({"日本"});
  std::vector<std::string> outputs = run(matcher, {"今", "日", "は", "日", "本", "語"});
  for (const std::string& out : outputs) EXPECT_TRUE(is_valid_utf8(out)) << out;
  EXPECT_EQ(joined(outputs), "今日は");
  EXPECT_TRUE(matcher.stopped());

  StopStringMatcher accent({"é!"});
  EXPECT_EQ(accent.push("café"), "caf");
  EXPECT_EQ(accent.push("?"), "é?");
  EXPECT_EQ(accent.push("é!"), "");
  EXPECT_TRUE(accent.stopped());
}

// Reference: find the first byte position where some stop string ends, cut at the earliest start
// among the strings ending there.
std::string reference_cut(const std::string& text, const std::vector<std::string>& stops) {
  for (size_t end = 1; end <= text.size(); ++end) {
    size_t cut = std::string::npos;
    for (const std::string& stop : stops) {
      if (stop.size() <= end && text.compare(end - stop.size(), stop.size(), stop) == 0) {
        cut = std::min(cut, end - stop.size());
      }
    }
    if (cut != std::string::npos) return text.substr(0, cut);
  }
  return text;
}

TEST(StopStringMatcherTest, AnySplitGivesTheReferenceResult) {
  const std::vector<std::string> stops = {"abab", "bba", "aaa", "c"};
  Rng rng(11);
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    const size_t length = rng.next_u64() % 16;
    for (size_t i = 0; i < length; ++i) text += "abbc"[rng.next_u64() % (round % 2 ? 4 : 3)];
    std::vector<std::string> pieces;
    for (size_t pos = 0; pos < text.size();) {
      size_t n = 1 + rng.next_u64() % 4;
      pieces.push_back(text.substr(pos, n));
      pos += n;
    }
    StopStringMatcher matcher(stops);
    const std::vector<std::string> outputs = run(matcher, pieces);
    const std::string expected = reference_cut(text, stops);
    ASSERT_EQ(joined(outputs), expected) << text;
    ASSERT_EQ(matcher.stopped(), expected.size() != text.size()) << text;
  }
}

}  // namespace
}  // namespace trellis
