// StreamDecoder: text that is valid UTF-8 after every token, even when a character's bytes come in
// separate byte tokens, and that adds up to decode().
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/utf8.h"
#include "gguf/gguf_file.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace trellis {
namespace {

const std::string kSp = "\xE2\x96\x81";  // U+2581

// <unk> 0, <s> 1, </s> 2, <0x00>..<0xFF> at 3..258, then a few pieces.
std::unique_ptr<Tokenizer> byte_tokenizer() {
  Vocab vocab = testing::byte_fallback_vocab();
  testing::add_token(vocab, kSp, TokenType::NORMAL, -1.0f);          // 259
  testing::add_token(vocab, kSp + "caf", TokenType::NORMAL, -2.0f);  // 260
  testing::add_token(vocab, "c", TokenType::NORMAL);
  testing::add_token(vocab, "a", TokenType::NORMAL);
  testing::add_token(vocab, "f", TokenType::NORMAL);
  testing::add_token(vocab, kSp + "c", TokenType::NORMAL, -3.0f);
  testing::add_token(vocab, kSp + "ca", TokenType::NORMAL, -2.5f);
  vocab.add_bos = true;
  vocab.add_space_prefix = true;
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::create(std::move(vocab));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  return std::move(*tokenizer);
}

TokenId byte_token(uint8_t byte) {
  return 3 + byte;
}

// Pushes every id, checking each piece of output, and returns the concatenation (with flush()).
std::string stream(const Tokenizer& tokenizer, const std::vector<TokenId>& ids,
                   std::vector<std::string>* outputs = nullptr) {
  StreamDecoder decoder(tokenizer);
  std::string all;
  for (TokenId id : ids) {
    std::string out = decoder.push(id);
    EXPECT_TRUE(is_valid_utf8(out)) << "after token " << id;
    if (outputs != nullptr) outputs->push_back(out);
    all += out;
  }
  std::string rest = decoder.flush();
  EXPECT_TRUE(is_valid_utf8(rest));
  return all + rest;
}

TEST(StreamDecoderTest, CharacterSplitOverByteTokensIsHeldBack) {
  auto tokenizer = byte_tokenizer();
  // "café" encodes as ▁caf <0xC3> <0xA9>.
  std::vector<TokenId> ids = tokenizer->encode("caf\xC3\xA9", false, false);
  ASSERT_EQ(ids, (std::vector<TokenId>{260, byte_token(0xC3), byte_token(0xA9)}));
  std::vector<std::string> outputs;
  EXPECT_EQ(stream(*tokenizer, ids, &outputs), tokenizer->decode(ids));
  EXPECT_EQ(outputs, (std::vector<std::string>{" caf", "", "\xC3\xA9"}));
}

TEST(StreamDecoderTest, FourByteEmojiAppearsWhole) {
  auto tokenizer = byte_tokenizer();
  // U+1F600 is F0 9F 98 80; with a space before and a letter after.
  std::vector<TokenId> ids = tokenizer->encode(
      "\xF0\x9F\x98\x80"
      "a",
      true, false);
  ASSERT_EQ(ids, (std::vector<TokenId>{1, 259, byte_token(0xF0), byte_token(0x9F), byte_token(0x98),
                                       byte_token(0x80), 262}));
  std::vector<std::string> outputs;
  EXPECT_EQ(stream(*tokenizer, ids, &outputs), tokenizer->decode(ids));
  EXPECT_EQ(outputs, (std::vector<std::string>{"", " ", "", "", "", "\xF0\x9F\x98\x80", "a"}));
}

TEST(StreamDecoderTest, FlushReplacesAnUnfinishedCharacter) {
  auto tokenizer = byte_tokenizer();
  StreamDecoder decoder(*tokenizer);
  EXPECT_EQ(decoder.push(262), "a");
  EXPECT_EQ(decoder.push(byte_token(0xF0)), "");
  EXPECT_EQ(decoder.push(byte_token(0x9F)), "");
  EXPECT_EQ(decoder.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(decoder.flush(), "");  // nothing left
  EXPECT_EQ(decoder.push(262), "a");
}

TEST(StreamDecoderTest, SpelledControlTokensKeepTheirText) {
  // Control tokens yield no text, except those the decoder is told to spell (a chat format's
  // markup that the reply is split by).
  auto tokenizer = byte_tokenizer();
  StreamDecoder plain(*tokenizer);
  EXPECT_EQ(plain.push(2), "");
  EXPECT_EQ(plain.push(262), "a");
  StreamDecoder spelling(*tokenizer, {2});
  EXPECT_EQ(spelling.push(2), "</s>");
  EXPECT_EQ(spelling.push(1), "") << "<s> is not spelled";
  EXPECT_EQ(spelling.push(262), "a");
}

TEST(StreamDecoderTest, InvalidBytesBecomeReplacementCharacters) {
  auto tokenizer = byte_tokenizer();
  StreamDecoder decoder(*tokenizer);
  // A lone continuation byte can never become valid: it is replaced at once.
  EXPECT_EQ(decoder.push(byte_token(0x80)), "\xEF\xBF\xBD");
  // A lead byte followed by a non-continuation: the lead is replaced, the letter kept.
  EXPECT_EQ(decoder.push(byte_token(0xC3)), "");
  EXPECT_EQ(decoder.push(262),
            "\xEF\xBF\xBD"
            "a");
}

TEST(StreamDecoderTest, ControlTokensStreamAsNothing) {
  auto tokenizer = byte_tokenizer();
  StreamDecoder decoder(*tokenizer);
  EXPECT_EQ(decoder.push(1), "");
  EXPECT_EQ(decoder.push(2), "");
  EXPECT_EQ(decoder.flush(), "");
}

TEST(StreamDecoderTest, SharedVocabTextsStreamLikeDecode) {
  TRELLIS_REQUIRE_SHARED();
  Result<GgufFile> file =
      GgufFile::open(testing::shared_dir() + "/tokenizer-vectors/ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(file.ok()) << file.error().message;
  Result<Vocab> vocab = load_vocab(*file);
  ASSERT_TRUE(vocab.ok()) << vocab.error().message;
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::create(std::move(*vocab));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  for (const std::string text :
       {"Hello world", "Cửa Việt",
        "🚀 (normal) 😶‍🌫️ (multiple emojis concatenated) ✅", "ស្ដាប់ខ្ញុំ", "在你好"}) {
    std::vector<TokenId> ids = (*tokenizer)->encode(text, true, false);
    EXPECT_EQ(stream(**tokenizer, ids), (*tokenizer)->decode(ids)) << text;
  }
}

}  // namespace
}  // namespace trellis
