// StopMatcher: stop tokens, max_tokens, stop strings across token boundaries, UTF-8 split over byte
// tokens, and streamed text that adds up to the non-streamed answer.
#include "engine/stop_matcher.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "base/utf8.h"
#include "sample/rng.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace trellis {
namespace {

const std::string kSp = "\xE2\x96\x81";  // U+2581, SPM's space

constexpr TokenId kEos = 2;
constexpr TokenId kHello = 259;
constexpr TokenId kWorld = 260;  // " world"
constexpr TokenId kHash = 261;   // "#"
constexpr TokenId kHash2 = 262;  // "##"
constexpr TokenId kBang = 263;   // "!"
constexpr TokenId kEot = 264;    // "<|eot|>", a control token

TokenId byte_token(uint8_t byte) {
  return 3 + byte;
}

// <unk> 0, <s> 1, </s> 2, <0x00>..<0xFF> at 3..258, then the pieces above.
std::unique_ptr<Tokenizer> make_tokenizer() {
  Vocab vocab = testing::byte_fallback_vocab();
  testing::add_token(vocab, "Hello", TokenType::NORMAL);
  testing::add_token(vocab, kSp + "world", TokenType::NORMAL);
  testing::add_token(vocab, "#", TokenType::NORMAL);
  testing::add_token(vocab, "##", TokenType::NORMAL);
  testing::add_token(vocab, "!", TokenType::NORMAL);
  testing::add_token(vocab, "<|eot|>", TokenType::CONTROL);
  vocab.eos_id = kEos;
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::create(std::move(vocab));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  return std::move(*tokenizer);
}

struct Outcome {
  std::vector<std::string> texts;
  FinishReason reason = FinishReason::NONE;
  int steps = 0;  // tokens pushed until finished (or all of them)
};

// Pushes tokens until the matcher finishes; each step's text must be valid UTF-8.
Outcome run(StopMatcher& matcher, const std::vector<TokenId>& ids) {
  Outcome result;
  for (TokenId id : ids) {
    StopMatcher::Step step = matcher.push(id);
    EXPECT_TRUE(is_valid_utf8(step.text));
    result.texts.push_back(step.text);
    ++result.steps;
    if (step.finished()) {
      result.reason = step.finish_reason;
      EXPECT_EQ(matcher.finish_reason(), step.finish_reason);
      break;
    }
  }
  return result;
}

StopCondition eos_condition() {
  StopCondition condition;
  condition.stop_token_ids = {kEos};
  return condition;
}

using Texts = std::vector<std::string>;

TEST(StopMatcherTest, ValidateRejectsBadConditions) {
  StopCondition condition;
  condition.max_tokens = 0;
  EXPECT_FALSE(condition.validate().ok());
  condition.max_tokens = 1;
  EXPECT_TRUE(condition.validate().ok());
  condition.stop_strings = {"ok", ""};
  ASSERT_FALSE(condition.validate().ok());
  EXPECT_EQ(condition.validate().error().message, "stop string 1 is empty");
  condition.stop_strings = {"\xC3"};
  EXPECT_FALSE(condition.validate().ok());
  condition.stop_strings = {};
  condition.stop_token_ids = {-3};
  EXPECT_FALSE(condition.validate().ok());
}

TEST(StopMatcherTest, FinishReasonNames) {
  EXPECT_EQ(finish_reason_name(FinishReason::STOP), "stop");
  EXPECT_EQ(finish_reason_name(FinishReason::LENGTH), "length");
}

TEST(StopMatcherTest, EosStopsAndIsNotEmitted) {
  auto tokenizer = make_tokenizer();
  StopMatcher matcher(eos_condition(), *tokenizer);
  Outcome result = run(matcher, {kHello, kWorld, kEos, kHello});
  EXPECT_EQ(result.texts, (Texts{"Hello", " world", ""}));
  EXPECT_EQ(result.reason, FinishReason::STOP);
  EXPECT_EQ(matcher.n_tokens(), 3);
  EXPECT_FALSE(matcher.matched_stop_string().has_value());
}

TEST(StopMatcherTest, AnyStopTokenStops) {
  auto tokenizer = make_tokenizer();
  StopCondition condition = eos_condition();
  condition.stop_token_ids.push_back(kEot);
  StopMatcher matcher(condition, *tokenizer);
  Outcome result = run(matcher, {kHello, kEot, kWorld});
  EXPECT_EQ(result.texts, (Texts{"Hello", ""}));
  EXPECT_EQ(result.reason, FinishReason::STOP);
}

TEST(StopMatcherTest, WithoutStopTokensEosIsJustAToken) {
  auto tokenizer = make_tokenizer();
  StopMatcher matcher(StopCondition{}, *tokenizer);
  Outcome result = run(matcher, {kHello, kEos, kWorld});
  EXPECT_EQ(result.texts, (Texts{"Hello", "", " world"}));
  EXPECT_EQ(result.reason, FinishReason::NONE);
}

TEST(StopMatcherTest, MaxTokensGivesLength) {
  auto tokenizer = make_tokenizer();
  StopCondition condition = eos_condition();
  condition.max_tokens = 2;
  StopMatcher matcher(condition, *tokenizer);
  Outcome result = run(matcher, {kHello, kWorld, kHello});
  EXPECT_EQ(result.texts, (Texts{"Hello", " world"}));
  EXPECT_EQ(result.reason, FinishReason::LENGTH);
  EXPECT_EQ(finish_reason_name(result.reason), "length");
}

TEST(StopMatcherTest, EosOnTheLastAllowedTokenIsStop) {
  auto tokenizer = make_tokenizer();
  StopCondition condition = eos_condition();
  condition.max_tokens = 2;
  StopMatcher matcher(condition, *tokenizer);
  EXPECT_EQ(run(matcher, {kHello, kEos}).reason, FinishReason::STOP);
}

TEST(StopMatcherTest, LengthReleasesHeldBackText) {
  auto tokenizer = make_tokenizer();
  StopCondition condition = eos_condition();
  condition.max_tokens = 2;
  condition.stop_strings = {"##!"};
  StopMatcher matcher(condition, *tokenizer);
  Outcome result = run(matcher, {kHello, kHash2});
  EXPECT_EQ(result.texts, (Texts{"Hello", "##"}));
  EXPECT_EQ(result.reason, FinishReason::LENGTH);
}

TEST(StopMatcherTest, EosReleasesHeldBackText) {
  auto tokenizer = make_tokenizer();
  StopCondition condition = eos_condition();
  condition.stop_strings = {"##!"};
  StopMatcher matcher(condition, *tokenizer);
  Outcome result = run(matcher, {kHello, kHash2, kEos});
  EXPECT_EQ(result.texts, (Texts{"Hello", "", "##"}));
  EXPECT_EQ(result.reason, FinishReason::STOP);
}

TEST(StopMatcherTest, StopStringAcrossTokens) {
  auto tokenizer = make_tokenizer();
  StopCondition condition = eos_condition();
  condition.stop_strings = {"o#!"};
  StopMatcher matcher(condition, *tokenizer);
  // "Hello" + "#" + "!": the stop starts inside the first token.
  Outcome result = run(matcher, {kHello, kHash, kBang, kWorld});
  EXPECT_EQ(result.texts, (Texts{"Hell", "", ""}));
  EXPECT_EQ(result.reason, FinishReason::STOP);
  EXPECT_EQ(matcher.matched_stop_string(), 0u);
}

TEST(StopMatcherTest, PartialStopThatFailsIsReleasedIntact) {
  auto tokenizer = make_tokenizer();
  StopCondition condition = eos_condition();
  condition.stop_strings = {"###"};
  StopMatcher matcher(condition, *tokenizer);
  Outcome result = run(matcher, {kHash2, kWorld, kHash, kHash, kBang, kEos});
  EXPECT_EQ(result.texts, (Texts{"", "## world", "", "", "##!", ""}));
  EXPECT_EQ(result.reason, FinishReason::STOP);
}

TEST(StopMatcherTest, StopStringBeatsLengthOnTheSameToken) {
  auto tokenizer = make_tokenizer();
  StopCondition condition = eos_condition();
  condition.max_tokens = 2;
  condition.stop_strings = {"o w"};
  StopMatcher matcher(condition, *tokenizer);
  Outcome result = run(matcher, {kHello, kWorld});
  EXPECT_EQ(result.texts, (Texts{"Hell", ""}));
  EXPECT_EQ(result.reason, FinishReason::STOP);
}

TEST(StopMatcherTest, SeveralStopStrings) {
  auto tokenizer = make_tokenizer();
  StopCondition condition = eos_condition();
  condition.stop_strings = {"world!", "#", "Hello!"};
  StopMatcher matcher(condition, *tokenizer);
  Outcome result = run(matcher, {kHello, kWorld, kHash2});
  // "Hello" may start "Hello!", then "world" may start "world!"; "#" ends the stream.
  EXPECT_EQ(result.texts, (Texts{"", "Hello ", "world"}));
  EXPECT_EQ(matcher.matched_stop_string(), 1u);
}

TEST(StopMatcherTest, StopStringAtTheVeryStart) {
  auto tokenizer = make_tokenizer();
  StopCondition condition = eos_condition();
  condition.stop_strings = {"Hello"};
  StopMatcher matcher(condition, *tokenizer);
  Outcome result = run(matcher, {kHello, kWorld});
  EXPECT_EQ(result.texts, (Texts{""}));
  EXPECT_EQ(result.reason, FinishReason::STOP);
}

TEST(StopMatcherTest, Utf8SplitAcrossByteTokens) {
  auto tokenizer = make_tokenizer();
  StopCondition condition = eos_condition();
  condition.stop_strings = {"\xC3\xA9!"};  // "é!"
  {
    StopMatcher matcher(condition, *tokenizer);
    // "Hello" <C3> <A9> "#": é is held (it may start "é!") and released with "#".
    Outcome result = run(matcher, {kHello, byte_token(0xC3), byte_token(0xA9), kHash, kEos});
    EXPECT_EQ(result.texts, (Texts{"Hello", "", "", "\xC3\xA9#", ""}));
  }
  {
    StopMatcher matcher(condition, *tokenizer);
    Outcome result = run(matcher, {kHello, byte_token(0xC3), byte_token(0xA9), kBang, kWorld});
    EXPECT_EQ(result.texts, (Texts{"Hello", "", "", ""}));
    EXPECT_EQ(result.reason, FinishReason::STOP);
  }
}

TEST(StopMatcherTest, IncompleteUtf8AtTheEndBecomesReplacementCharacter) {
  auto tokenizer = make_tokenizer();
  StopMatcher matcher(eos_condition(), *tokenizer);
  Outcome result = run(matcher, {kHello, byte_token(0xC3), kEos});
  EXPECT_EQ(result.texts, (Texts{"Hello", "", "\xEF\xBF\xBD"}));
}

TEST(StopMatcherTest, FinishFromOutsideReleasesHeldText) {
  auto tokenizer = make_tokenizer();
  StopCondition condition = eos_condition();
  condition.stop_strings = {"##!"};
  StopMatcher matcher(condition, *tokenizer);
  EXPECT_EQ(matcher.push(kHash).text, "");
  StopMatcher::Step step = matcher.finish(FinishReason::LENGTH);
  EXPECT_EQ(step.text, "#");
  EXPECT_EQ(step.finish_reason, FinishReason::LENGTH);
  EXPECT_TRUE(matcher.finished());
}

TEST(StopMatcherTest, StreamedTextEqualsTruncatedFullText) {
  auto tokenizer = make_tokenizer();
  const std::vector<TokenId> alphabet = {kHello, kWorld, kHash, kHash2, kBang};
  StopCondition condition;
  condition.stop_strings = {"###", "o w", "!H"};
  Rng rng(21);
  for (int round = 0; round < 500; ++round) {
    std::vector<TokenId> ids;
    const size_t length = 1 + rng.next_u64() % 8;
    for (size_t i = 0; i < length; ++i) ids.push_back(alphabet[rng.next_u64() % alphabet.size()]);
    StopMatcher matcher(condition, *tokenizer);
    std::string streamed;
    for (TokenId id : ids) {
      streamed += matcher.push(id).text;
      if (matcher.finished()) break;
    }
    if (!matcher.finished()) streamed += matcher.finish(FinishReason::LENGTH).text;
    // Non-streamed: the whole text cut before the first stop string to end.
    const std::string full = tokenizer->decode(ids);
    size_t cut = full.size();
    size_t first_end = std::string::npos;
    for (const std::string& stop : condition.stop_strings) {
      size_t pos = full.find(stop);
      if (pos == std::string::npos) continue;
      if (pos + stop.size() < first_end || (pos + stop.size() == first_end && pos < cut)) {
        first_end = pos + stop.size();
        cut = pos;
      }
    }
    ASSERT_EQ(streamed, full.substr(0, cut)) << full;
  }
}

}  // namespace
}  // namespace trellis
