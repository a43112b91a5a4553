// UTF-8 helpers: sequence lengths, encoding, decoding with replacement, complete prefixes.
#include "base/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace trellis {
namespace {

TEST(Utf8Test, SequenceLength) {
  EXPECT_EQ(utf8_sequence_length(0x00), 1u);
  EXPECT_EQ(utf8_sequence_length('a'), 1u);
  EXPECT_EQ(utf8_sequence_length(0x7F), 1u);
  EXPECT_EQ(utf8_sequence_length(0x80), 0u);  // continuation
  EXPECT_EQ(utf8_sequence_length(0xBF), 0u);
  EXPECT_EQ(utf8_sequence_length(0xC3), 2u);
  EXPECT_EQ(utf8_sequence_length(0xE2), 3u);
  EXPECT_EQ(utf8_sequence_length(0xF0), 4u);
  EXPECT_EQ(utf8_sequence_length(0xF8), 0u);
  EXPECT_EQ(utf8_sequence_length(0xFF), 0u);
}

TEST(Utf8Test, EncodeBoundaries) {
  EXPECT_EQ(encode_utf8(0x41), "A");
  EXPECT_EQ(encode_utf8(0x7F), "\x7F");
  EXPECT_EQ(encode_utf8(0x80), "\xC2\x80");
  EXPECT_EQ(encode_utf8(0xE9), "\xC3\xA9");
  EXPECT_EQ(encode_utf8(0x7FF), "\xDF\xBF");
  EXPECT_EQ(encode_utf8(0x800), "\xE0\xA0\x80");
  EXPECT_EQ(encode_utf8(0x2581), "\xE2\x96\x81");
  EXPECT_EQ(encode_utf8(0xFFFF), "\xEF\xBF\xBF");
  EXPECT_EQ(encode_utf8(0x10000), "\xF0\x90\x80\x80");
  EXPECT_EQ(encode_utf8(0x1F600), "\xF0\x9F\x98\x80");
  EXPECT_EQ(encode_utf8(0x10FFFF), "\xF4\x8F\xBF\xBF");
  std::string out = "x";
  append_utf8(out, 0xE9);
  EXPECT_EQ(out, "x\xC3\xA9");
  EXPECT_EQ(encode_utf8(0), std::string(1, '\0'));
}

TEST(Utf8Test, DecodeRoundTripsEveryScalarValue) {
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string text = encode_utf8(cp);
    size_t pos = 0;
    ASSERT_EQ(decode_utf8(text, pos), cp);
    ASSERT_EQ(pos, text.size());
  }
}

// Decodes the whole text into code points.
std::u32string decode_all(std::string_view text) {
  std::u32string out;
  size_t pos = 0;
  while (pos < text.size()) out.push_back(decode_utf8(text, pos));
  return out;
}

TEST(Utf8Test, InvalidSequencesDecodeAsReplacementOneByteAtATime) {
  EXPECT_EQ(decode_all("\x80"), U"\uFFFD");
  EXPECT_EQ(decode_all("a\xFF"
                       "b"),
            U"a\uFFFD"
            "b");
  EXPECT_EQ(decode_all("\xC3"), U"\uFFFD");            // truncated
  EXPECT_EQ(decode_all("\xE2\x96"), U"\uFFFD\uFFFD");  // truncated, then continuation
  EXPECT_EQ(decode_all("\xC3"
                       "a"),
            U"\uFFFD"
            "a");                                                // lead without continuation
  EXPECT_EQ(decode_all("\xC0\xAF"), U"\uFFFD\uFFFD");            // overlong '/'
  EXPECT_EQ(decode_all("\xE0\x80\xAF"), U"\uFFFD\uFFFD\uFFFD");  // overlong
  EXPECT_EQ(decode_all("\xED\xA0\x80"), U"\uFFFD\uFFFD\uFFFD");  // surrogate D800
  EXPECT_EQ(decode_all("\xF4\x90\x80\x80"), U"\uFFFD\uFFFD\uFFFD\uFFFD");  // above U+10FFFF
  EXPECT_EQ(decode_all("\xEF\xBF\xBD"), U"\uFFFD");                        // a real U+FFFD
}

TEST(Utf8Test, CompletePrefixHoldsBackOnlyAnUnfinishedCharacter) {
  EXPECT_EQ(utf8_complete_prefix(""), 0u);
  EXPECT_EQ(utf8_complete_prefix("abc"), 3u);
  EXPECT_EQ(utf8_complete_prefix("a\xC3"), 1u);
  EXPECT_EQ(utf8_complete_prefix("a\xC3\xA9"), 3u);
  EXPECT_EQ(utf8_complete_prefix("a\xE2"), 1u);
  EXPECT_EQ(utf8_complete_prefix("a\xE2\x96"), 1u);
  EXPECT_EQ(utf8_complete_prefix("a\xE2\x96\x81"), 4u);
  EXPECT_EQ(utf8_complete_prefix("\xF0"), 0u);
  EXPECT_EQ(utf8_complete_prefix("\xF0\x9F"), 0u);
  EXPECT_EQ(utf8_complete_prefix("\xF0\x9F\x98"), 0u);
  EXPECT_EQ(utf8_complete_prefix("\xF0\x9F\x98\x80"), 4u);
  EXPECT_EQ(utf8_complete_prefix("x\xF0\x9F\x98\x80\xF0\x9F"), 5u);
  // Bytes that can never start a character are not held back (the caller replaces them).
  EXPECT_EQ(utf8_complete_prefix("a\x80"), 2u);
  EXPECT_EQ(utf8_complete_prefix("a\xFF"), 2u);
  EXPECT_EQ(utf8_complete_prefix("\x80\x80\x80\x80"), 4u);
  // A lead whose sequence was cut short by another character is not held back either.
  EXPECT_EQ(utf8_complete_prefix("\xE2"
                                 "a"),
            2u);
}

TEST(Utf8Test, CompletePrefixOfEveryCutOfAValidText) {
  const std::string text = "a\xC3\xA9\xE2\x96\x81\xF0\x9F\x98\x80z";
  const size_t boundaries[] = {0, 1, 3, 6, 10, 11};
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    size_t expected = 0;
    for (size_t b : boundaries) {
      if (b <= cut) expected = b;
    }
    EXPECT_EQ(utf8_complete_prefix(std::string_view(text).substr(0, cut)), expected) << cut;
  }
}

TEST(Utf8Test, IsValid) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("plain"));
  EXPECT_TRUE(is_valid_utf8("Cửa Việt 🚀"));
  EXPECT_TRUE(is_valid_utf8("\xEF\xBF\xBD"));
  EXPECT_FALSE(is_valid_utf8("\x80"));
  EXPECT_FALSE(is_valid_utf8("ab\xC3"));
  EXPECT_FALSE(is_valid_utf8("\xC0\x80"));
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));
  EXPECT_FALSE(is_valid_utf8("\xF0\x9F\x98"));
}

}  // namespace
}  // namespace trellis
