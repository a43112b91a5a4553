// The WordPiece tokenizer on a small hand-built vocab (BERT's basic tokenizer, then the longest
// pieces of each word), and the Unicode properties it rests on. The 46 cases of llama.cpp's
// bert-bge vectors run in tokenizer_vectors_test.
#include "tokenizer/wordpiece_tokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_props.h"
#include "tokenizer/vocab.h"

namespace trellis {
namespace {

const std::string kStart = "\xE2\x96\x81";  // U+2581: the first piece of a word

struct Fixture {
  Vocab vocab;
  std::unique_ptr<Tokenizer> tokenizer;

  TokenId add(const std::string& text, TokenType type = TokenType::NORMAL) {
    vocab.tokens.push_back(text);
    vocab.types.push_back(type);
    return vocab.size() - 1;
  }
  TokenId id(const std::string& text) const {
    for (TokenId i = 0; i < vocab.size(); ++i) {
      if (vocab.tokens[static_cast<size_t>(i)] == text) return i;
    }
    ADD_FAILURE() << "no token " << text;
    return kNoToken;
  }
  std::vector<TokenId> ids(const std::vector<std::string>& texts) const {
    std::vector<TokenId> out;
    for (const std::string& text : texts) out.push_back(id(text));
    return out;
  }

  Fixture() {
    vocab.kind = TokenizerKind::WORDPIECE;
    vocab.model = "bert";
    vocab.pad_id = add("[PAD]", TokenType::CONTROL);
    vocab.unk_id = add("[UNK]", TokenType::CONTROL);
    vocab.bos_id = add("[CLS]", TokenType::CONTROL);
    vocab.eos_id = add("[SEP]", TokenType::CONTROL);
    vocab.add_bos = true;
    vocab.add_eos = true;
    for (const char* word :
         {"hello", "fu", "hu", "world", "!", ",", "$", "1", "12", "cafe", "\xE6\x88\x91"})
      add(kStart + word);
    for (const char* piece : {"hrer", "h", "r", "e", "3", "##"}) add(piece);
    Result<std::unique_ptr<Tokenizer>> created = Tokenizer::create(vocab);
    EXPECT_TRUE(created.ok()) << created.error().message;
    if (created.ok()) tokenizer = std::move(*created);
  }
};

TEST(WordPieceTokenizer, LowercasesDropsAccentsAndSplitsPunctuation) {
  Fixture f;
  // "Ü" decomposes to U + diaeresis; the mark goes, the letter is lowercased.
  EXPECT_EQ(f.tokenizer->encode("Hello, F\xC3\x9CHRER!", false, false),
            f.ids({kStart + "hello", kStart + ",", kStart + "fu", "hrer", kStart + "!"}));
  EXPECT_EQ(f.tokenizer->encode("  caf\xC3\xA9\t\n", false, false), f.ids({kStart + "cafe"}));
}

TEST(WordPieceTokenizer, TakesTheLongestPieceFirst) {
  Fixture f;
  EXPECT_EQ(f.tokenizer->encode("123", false, false), f.ids({kStart + "12", "3"}));
  EXPECT_EQ(f.tokenizer->encode("huhre", false, false), f.ids({kStart + "hu", "h", "r", "e"}));
}

TEST(WordPieceTokenizer, AWordThatCannotBeCoveredIsOneUnknownToken) {
  Fixture f;
  // "hux" gets "▁hu" then nothing for "x": the whole word is [UNK], its pieces dropped.
  EXPECT_EQ(f.tokenizer->encode("hello hux world", false, false),
            f.ids({kStart + "hello", "[UNK]", kStart + "world"}));
}

TEST(WordPieceTokenizer, IdeographsAndAsciiSymbolsStandAloneOthersDoNot) {
  Fixture f;
  // U+6211 is a word of its own, glued or not; "$" (an ASCII symbol) too; U+FF5E (a symbol
  // outside ASCII) stays in its word, which then has no pieces.
  EXPECT_EQ(f.tokenizer->encode("hello\xE6\x88\x91world", false, false),
            f.ids({kStart + "hello", kStart + "\xE6\x88\x91", kStart + "world"}));
  EXPECT_EQ(f.tokenizer->encode("$1", false, false), f.ids({kStart + "$", kStart + "1"}));
  EXPECT_EQ(f.tokenizer->encode("hello\xEF\xBD\x9E", false, false), f.ids({"[UNK]"}));
}

TEST(WordPieceTokenizer, ControlCharactersAreDroppedAndSpecialTokensAdded) {
  Fixture f;
  EXPECT_EQ(f.tokenizer->encode(std::string("hel\x01lo\xE2\x80\x8B", 9), true, false),
            f.ids({"[CLS]", kStart + "hello", "[SEP]"}));
  EXPECT_EQ(f.tokenizer->encode("[SEP]hello", false, true), f.ids({"[SEP]", kStart + "hello"}));
  EXPECT_EQ(f.tokenizer->encode("", true, false), f.ids({"[CLS]", "[SEP]"}));
}

TEST(WordPieceTokenizer, DecodesWordStartsWithASpaceAndHidesControlTokens) {
  Fixture f;
  const std::vector<TokenId> ids = f.tokenizer->encode("Hello, Fuhrer!", true, false);
  EXPECT_EQ(f.tokenizer->decode(ids), " hello , fuhrer !");
  EXPECT_EQ(f.tokenizer->decode(ids, /*render_special=*/true), "[CLS] hello , fuhrer ![SEP]");
}

TEST(WordPieceTokenizer, RefusesAVocabOfAnotherKind) {
  Fixture f;
  f.vocab.kind = TokenizerKind::BPE;
  EXPECT_FALSE(make_wordpiece_tokenizer(f.vocab).ok());
}

TEST(UnicodeProps, CategoriesCaseAndDecomposition) {
  EXPECT_TRUE(unicode::is_punctuation('!'));
  EXPECT_TRUE(unicode::is_punctuation(0x3001));  // ideographic comma
  EXPECT_FALSE(unicode::is_punctuation('$'));
  EXPECT_TRUE(unicode::is_symbol('$'));
  EXPECT_TRUE(unicode::is_symbol(0xFF5E));
  EXPECT_TRUE(unicode::is_nonspacing_mark(0x301));
  EXPECT_FALSE(unicode::is_nonspacing_mark('e'));
  EXPECT_TRUE(unicode::is_control(0x200B));  // zero-width space (Cf)
  EXPECT_TRUE(unicode::is_control(0x200D));  // zero-width joiner (Cf)
  EXPECT_TRUE(unicode::is_space(0x3000));
  EXPECT_TRUE(unicode::is_space('\n'));
  EXPECT_EQ(unicode::to_lower('A'), static_cast<uint32_t>('a'));
  EXPECT_EQ(unicode::to_lower(0x0416), 0x0436u);  // Cyrillic Zhe
  EXPECT_EQ(unicode::to_lower('a'), static_cast<uint32_t>('a'));
  std::vector<uint32_t> out;
  unicode::append_decomposition(0x1EA0 + 0x27, out);  // U+1EC7: e with circumflex and dot below
  EXPECT_EQ(out, (std::vector<uint32_t>{'e', 0x323, 0x302}));
  out.clear();
  unicode::append_decomposition(0xAC01, out);  // a Hangul syllable with a trailing consonant
  EXPECT_EQ(out, (std::vector<uint32_t>{0x1100, 0x1161, 0x11A8}));
  out.clear();
  unicode::append_decomposition('x', out);
  EXPECT_EQ(out, std::vector<uint32_t>{'x'});
}

}  // namespace
}  // namespace trellis
