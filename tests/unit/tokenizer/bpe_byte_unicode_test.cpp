#include <gtest/gtest.h>

#include <set>
#include <string>

#include "base/utf8.h"
#include "tokenizer/byte_unicode.h"

namespace trellis {
namespace {

TEST(ByteUnicodeTest, PrintableBytesMapToThemselves) {
  for (int byte = 0; byte < 256; ++byte) {
    bool printable =
        (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE);
    if (printable) {
      EXPECT_EQ(byte_to_unicode(static_cast<uint8_t>(byte)), static_cast<char32_t>(byte))
          << "byte " << byte;
    } else {
      EXPECT_GE(byte_to_unicode(static_cast<uint8_t>(byte)), 0x100u) << "byte " << byte;
    }
  }
}

TEST(ByteUnicodeTest, ShiftedBytesTakeConsecutiveCodePointsInByteOrder) {
  EXPECT_EQ(byte_to_unicode(0x00), 0x100u);
  EXPECT_EQ(byte_to_unicode('\t'), 0x109u);
  EXPECT_EQ(byte_to_unicode('\n'), 0x10Au);  // 'Ċ'
  EXPECT_EQ(byte_to_unicode(' '), 0x120u);   // 'Ġ'
  EXPECT_EQ(byte_to_unicode(0x7F), 0x121u);
  EXPECT_EQ(byte_to_unicode(0xA0), 0x142u);
  EXPECT_EQ(byte_to_unicode(0xAD), 0x143u);
}

TEST(ByteUnicodeTest, AllBytesMapToDistinctCodePointsAndBack) {
  std::set<char32_t> seen;
  for (int byte = 0; byte < 256; ++byte) {
    char32_t cp = byte_to_unicode(static_cast<uint8_t>(byte));
    EXPECT_TRUE(seen.insert(cp).second) << "code point of byte " << byte << " is not unique";
    std::optional<uint8_t> back = unicode_to_byte(cp);
    ASSERT_TRUE(back.has_value()) << "byte " << byte;
    EXPECT_EQ(*back, byte);
  }
  EXPECT_EQ(seen.size(), 256u);
  EXPECT_EQ(*seen.rbegin(), 0x143u);
}

TEST(ByteUnicodeTest, CodePointsOutsideTheMappingHaveNoByte) {
  EXPECT_FALSE(unicode_to_byte(0x20).has_value());  // space itself is shifted
  EXPECT_FALSE(unicode_to_byte(0x7F).has_value());
  EXPECT_FALSE(unicode_to_byte(0xAD).has_value());
  EXPECT_FALSE(unicode_to_byte(0x144).has_value());
  EXPECT_FALSE(unicode_to_byte(0x20AC).has_value());
  EXPECT_FALSE(unicode_to_byte(0x10FFFF).has_value());
}

TEST(ByteUnicodeTest, StringRoundTripOfAllBytes) {
  std::string bytes;
  for (int byte = 0; byte < 256; ++byte) bytes.push_back(static_cast<char>(byte));
  bytes += "Hello, world! \xF0\x9F\xA6\x99 caf\xC3\xA9";
  std::string mapped = bytes_to_unicode(bytes);
  EXPECT_TRUE(is_valid_utf8(mapped));
  std::optional<std::string> back = unicode_to_bytes(mapped);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, bytes);
}

TEST(ByteUnicodeTest, KnownTokenSpellings) {
  EXPECT_EQ(bytes_to_unicode(" world"), "\xC4\xA0world");   // "Ġworld"
  EXPECT_EQ(bytes_to_unicode("\n\n"), "\xC4\x8A\xC4\x8A");  // "ĊĊ"
  // 'é' (C3 A9) becomes the two characters 'Ã' and '©'.
  EXPECT_EQ(bytes_to_unicode("\xC3\xA9"), "\xC3\x83\xC2\xA9");
  EXPECT_EQ(unicode_to_bytes("\xC4\xA0the"), std::optional<std::string>(" the"));
}

TEST(ByteUnicodeTest, UnmappedTextIsRejected) {
  EXPECT_FALSE(unicode_to_bytes("a b").has_value());           // a plain space is not mapped
  EXPECT_FALSE(unicode_to_bytes("\xE2\x82\xAC").has_value());  // U+20AC
  EXPECT_FALSE(unicode_to_bytes("\xC3").has_value());          // truncated UTF-8
  EXPECT_EQ(unicode_to_bytes(""), std::optional<std::string>(""));
}

}  // namespace
}  // namespace trellis
