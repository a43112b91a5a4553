#include "tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace trellis {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(std::string_view pre_type, std::string_view text) {
  Result<PreTokenizer> pre = PreTokenizer::for_pre_type(pre_type);
  EXPECT_TRUE(pre.ok()) << pre.error().message;
  if (!pre.ok()) return {};
  Pieces out;
  for (std::string_view piece : pre->split(text)) out.emplace_back(piece);
  return out;
}

TEST(PreTokenizerTest, Gpt2WordsCarryTheirLeadingSpace) {
  EXPECT_EQ(split("gpt-2", "Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split("gpt-2", "Hello, world!"), (Pieces{"Hello", ",", " world", "!"}));
  EXPECT_EQ(split("gpt-2", " 123abc"), (Pieces{" 123", "abc"}));
}

TEST(PreTokenizerTest, Gpt2ContractionsAreCaseSensitive) {
  EXPECT_EQ(split("gpt-2", "it's they're we've I'd"),
            (Pieces{"it", "'s", " they", "'re", " we", "'ve", " I", "'d"}));
  EXPECT_EQ(split("gpt-2", "IT'S"), (Pieces{"IT", "'", "S"}));
  EXPECT_EQ(split("gpt-2", "don't"), (Pieces{"don", "'t"}));
}

TEST(PreTokenizerTest, Gpt2WhitespaceLeavesOneSpaceForTheNextWord) {
  // \s+(?!\S) stops one space short of a word, which takes that space.
  EXPECT_EQ(split("gpt-2", "  \n\n  a"), (Pieces{"  \n\n ", " a"}));
  EXPECT_EQ(split("gpt-2", "a   "), (Pieces{"a", "   "}));
  EXPECT_EQ(split("gpt-2", "a\tb"), (Pieces{"a", "\t", "b"}));
}

TEST(PreTokenizerTest, Llama3SplitsDigitsIntoGroupsOfAtMostThree) {
  EXPECT_EQ(split("llama-bpe", "1"), (Pieces{"1"}));
  EXPECT_EQ(split("llama-bpe", "1234567"), (Pieces{"123", "456", "7"}));
  EXPECT_EQ(split("llama-bpe", "x12345 6"), (Pieces{"x", "123", "45", " ", "6"}));
}

TEST(PreTokenizerTest, Llama3ContractionsIgnoreCase) {
  EXPECT_EQ(split("llama-bpe", "I'VE we'Re"), (Pieces{"I", "'VE", " we", "'Re"}));
  EXPECT_EQ(split("llama-bpe", "it's"), (Pieces{"it", "'s"}));
}

TEST(PreTokenizerTest, Llama3KeepsNewlinesWithPrecedingWhitespace) {
  EXPECT_EQ(split("llama-bpe", "  \n\n  a"), (Pieces{"  \n\n", " ", " a"}));
  EXPECT_EQ(split("llama-bpe", "a.\n\nb"), (Pieces{"a", ".\n\n", "b"}));
  // A letter run may take one leading non-letter, non-digit character that is not a newline.
  EXPECT_EQ(split("llama-bpe", "(hello) $x"), (Pieces{"(hello", ")", " $", "x"}));
  EXPECT_EQ(split("llama-bpe", "a-b"), (Pieces{"a", "-b"}));
}

TEST(PreTokenizerTest, Qwen2SplitsEveryDigit) {
  EXPECT_EQ(split("qwen2", "1234 ab"), (Pieces{"1", "2", "3", "4", " ab"}));
}

TEST(PreTokenizerTest, Gpt4oSplitsCamelCaseAndKeepsContractionsWithTheWord) {
  // gpt-oss's pre type: an upper-case run then lower-case letters make one word, so camel case
  // splits before each capital; contractions stay with their word; digits go in threes; a
  // punctuation run takes the newline after it.
  EXPECT_EQ(split("gpt-4o", "HelloWorld's JSONParser 1234567"),
            (Pieces{"Hello", "World's", " JSONParser", " ", "123", "456", "7"}));
  EXPECT_EQ(split("gpt-4o", "a/b;\nc  d"), (Pieces{"a", "/b", ";\n", "c", " ", " d"}));
}

TEST(PreTokenizerTest, StarcoderIsolatesDigitsBeforeTheGpt2Pattern) {
  EXPECT_EQ(split("starcoder", "a123 b"), (Pieces{"a", "1", "2", "3", " b"}));
  EXPECT_EQ(split("refact", " 42"), (Pieces{" ", "4", "2"}));
}

TEST(PreTokenizerTest, FalconSplitsPunctuationThenDigitTriples) {
  EXPECT_EQ(split("falcon", "a+b=1234"), (Pieces{"a", "+", "b", "=", "123", "4"}));
  EXPECT_EQ(split("falcon", "Hi!!! ok"), (Pieces{"Hi", "!!!", " ok"}));
}

TEST(PreTokenizerTest, DeepseekCoderSeparatesNewlinesLettersAndDigits) {
  EXPECT_EQ(split("deepseek-coder", "Hello world\n123"),
            (Pieces{"Hello", " world", "\n", "1", "2", "3"}));
  EXPECT_EQ(split("deepseek-coder", "x, y"), (Pieces{"x", ",", " y"}));
}

TEST(PreTokenizerTest, DeepseekLlmSeparatesScripts) {
  EXPECT_EQ(split("deepseek-llm", "Hi \xE4\xBD\xA0\xE5\xA5\xBD 42!"),
            (Pieces{"Hi", " ", "\xE4\xBD\xA0\xE5\xA5\xBD", " ", "42", "!"}));
  EXPECT_EQ(split("deepseek-llm", "a\n\nb  "), (Pieces{"a", "\n", "\n", "b", "  "}));
}

TEST(PreTokenizerTest, UnicodeLettersAndNumbersAreRecognized) {
  // Cyrillic letters are \p{L}; Arabic-Indic digits are \p{N}.
  EXPECT_EQ(split("gpt-2", "\xD0\xBD\xD0\xB5 \xD9\xA3\xD9\xA4"),
            (Pieces{"\xD0\xBD\xD0\xB5", " \xD9\xA3\xD9\xA4"}));
}

TEST(PreTokenizerTest, InvalidUtf8BytesBecomeTheirOwnPieces) {
  std::string text =
      "ab\xFF"
      "cd \xC3";
  Pieces pieces = split("gpt-2", text);
  EXPECT_EQ(pieces, (Pieces{"ab", "\xFF", "cd", " ", "\xC3"}));
}

TEST(PreTokenizerTest, PiecesAlwaysConcatenateToTheText) {
  const std::vector<std::string> texts = {
      "",
      " ",
      "\n \n\n \t \t\t \t\n  \n   \n    \n     \n",
      "Hello, y'all! How are you \xF0\x9F\x98\x81 ?\xE6\x88\x91\xE6\x83\xB3 1314151\xE5\xA4\xA9",
      "3.3 3..3 3...3 ------======= ''''''```````\"\"\"\"......!!!!!!??????",
      "bad \x80\x80 utf8 \xF0\x9F",
  };
  for (const std::string& type : known_pre_types()) {
    Result<PreTokenizer> pre = PreTokenizer::for_pre_type(type);
    ASSERT_TRUE(pre.ok()) << type << ": " << pre.error().message;
    for (const std::string& text : texts) {
      std::string joined;
      for (std::string_view piece : pre->split(text)) {
        EXPECT_FALSE(piece.empty()) << type;
        joined += piece;
      }
      EXPECT_EQ(joined, text) << type;
    }
  }
}

TEST(PreTokenizerTest, UnknownPreTypeIsAnErrorNamingIt) {
  Result<PreTokenizer> pre = PreTokenizer::for_pre_type("no-such-pre");
  ASSERT_FALSE(pre.ok());
  EXPECT_NE(pre.error().message.find("'no-such-pre'"), std::string::npos) << pre.error().message;
}

TEST(PreTokenizerTest, BadPatternIsAnErrorNamingIt) {
  const std::string_view patterns[] = {"(unclosed"};
  Result<PreTokenizer> pre = PreTokenizer::from_patterns(patterns);
  ASSERT_FALSE(pre.ok());
  EXPECT_NE(pre.error().message.find("(unclosed"), std::string::npos) << pre.error().message;
}

TEST(PreTokenizerTest, LongWhitespaceRunIsOnePiece) {
  std::string text(100000, ' ');
  text += "x";
  Pieces pieces = split("llama-bpe", text);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].size(), 99999u);
  EXPECT_EQ(pieces[1], " x");
}

TEST(PreTokenizerTest, ConcurrentSplitsAgree) {
  Result<PreTokenizer> pre = PreTokenizer::for_pre_type("llama-bpe");
  ASSERT_TRUE(pre.ok());
  const std::string text =
      "The year 2024: it's 12345 degrees! \xD0\xBD\xD0\xB5\xD1\x89\xD0\xBE\n\n ok";
  const std::vector<std::string_view> expected = pre->split(text);
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        if (pre->split(text) != expected) ++mismatches[t];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int count : mismatches) EXPECT_EQ(count, 0);
}

}  // namespace
}  // namespace trellis
