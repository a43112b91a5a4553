// The SentencePiece-style tokenizer on small hand-built vocabs: merge order, byte fallback, the
// space prefix, special tokens, pieces, and concurrent encoding.
#include "tokenizer/spm_tokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "gguf/gguf_file.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace trellis {
namespace {

const std::string kSp = "\xE2\x96\x81";  // U+2581

// Builds a vocab token by token; ids are assigned in order of add().
struct VocabBuilder {
  Vocab vocab;

  VocabBuilder() {
    vocab.kind = TokenizerKind::SPM;
    vocab.model = "llama";
    vocab.pre = "default";
  }
  TokenId add(const std::string& text, float score = 0.0f, TokenType type = TokenType::NORMAL) {
    vocab.tokens.push_back(text);
    vocab.scores.push_back(score);
    vocab.types.push_back(type);
    return vocab.size() - 1;
  }
  // <unk> 0, <s> 1, </s> 2, then <0x00>..<0xFF> at 3..258 (the Llama layout).
  VocabBuilder& llama_layout(bool with_bytes = true) {
    vocab.unk_id = add("<unk>", 0, TokenType::UNKNOWN);
    vocab.bos_id = add("<s>", 0, TokenType::CONTROL);
    vocab.eos_id = add("</s>", 0, TokenType::CONTROL);
    if (with_bytes) {
      static constexpr char kHex[] = "0123456789ABCDEF";
      for (int b = 0; b < 256; ++b) {
        add(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", 0, TokenType::BYTE);
      }
    }
    vocab.add_bos = true;
    vocab.add_space_prefix = true;
    return *this;
  }
  std::unique_ptr<Tokenizer> build() {
    Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::create(vocab);
    EXPECT_TRUE(tokenizer.ok()) << tokenizer.error().message;
    return tokenizer.ok() ? std::move(*tokenizer) : nullptr;
  }
};

TokenId byte_token(uint8_t byte) {
  return 3 + byte;
}  // in llama_layout()

std::vector<TokenId> encode(const Tokenizer& t, const std::string& text) {
  return t.encode(text, /*add_special=*/false, /*parse_special=*/false);
}

TEST(SpmTokenizerTest, HighestScoringPairMergesFirst) {
  VocabBuilder b;
  b.vocab.add_space_prefix = false;
  TokenId a = b.add("a"), bb = b.add("b"), c = b.add("c");
  TokenId ab = b.add("ab", -2.0f), bc = b.add("bc", -1.0f);
  auto t = b.build();
  EXPECT_EQ(encode(*t, "abc"), (std::vector<TokenId>{a, bc}));
  (void)bb;
  (void)c;
  (void)ab;
}

TEST(SpmTokenizerTest, TiesMergeTheLeftmostPair) {
  VocabBuilder b;
  b.vocab.add_space_prefix = false;
  TokenId a = b.add("a"), aa = b.add("aa", -1.0f);
  auto t = b.build();
  EXPECT_EQ(encode(*t, "aaa"), (std::vector<TokenId>{aa, a}));
  EXPECT_EQ(encode(*t, "aaaa"), (std::vector<TokenId>{aa, aa}));
}

TEST(SpmTokenizerTest, MergesChainIntoLongerPieces) {
  VocabBuilder b;
  b.llama_layout();
  b.add("h"), b.add("e"), b.add("l"), b.add("o");
  b.add(kSp, -1.0f);
  b.add(kSp + "h", -5.0f);
  b.add("ll", -2.0f);
  b.add("llo", -3.0f);
  b.add("he", -4.0f);
  TokenId hello = b.add(kSp + "hello", -6.0f);
  b.add(kSp + "he", -7.0f);
  auto t = b.build();
  // ▁ h e l l o: ll (-2), llo (-3), he (-4); ▁h (-5) is then stale since h grew into he;
  // ▁he (-7), and only then ▁he+llo = ▁hello (-6) becomes a candidate.
  EXPECT_EQ(encode(*t, "hello"), (std::vector<TokenId>{hello}));
}

TEST(SpmTokenizerTest, SpacesAreEscapedAndPrefixed) {
  VocabBuilder b;
  b.llama_layout();
  TokenId sp = b.add(kSp, -1.0f);
  TokenId x = b.add("x");
  TokenId sp_x = b.add(kSp + "x", -2.0f);
  auto t = b.build();
  EXPECT_EQ(encode(*t, "x"), (std::vector<TokenId>{sp_x}));
  EXPECT_EQ(encode(*t, "x x"), (std::vector<TokenId>{sp_x, sp_x}));
  EXPECT_EQ(encode(*t, " x"), (std::vector<TokenId>{sp, sp_x}));
  EXPECT_EQ(encode(*t, ""), (std::vector<TokenId>{}));  // no prefix for an empty text
  b.vocab.add_space_prefix = false;
  auto no_prefix = b.build();
  EXPECT_EQ(encode(*no_prefix, "x"), (std::vector<TokenId>{x}));
  EXPECT_EQ(encode(*no_prefix, "x x"), (std::vector<TokenId>{x, sp_x}));
}

TEST(SpmTokenizerTest, UnknownCharactersFallBackToBytes) {
  VocabBuilder b;
  b.llama_layout();
  TokenId sp = b.add(kSp, -1.0f);
  auto t = b.build();
  // "é" = C3 A9, tab and newline are not escaped.
  EXPECT_EQ(encode(*t, "\xC3\xA9\t\n"),
            (std::vector<TokenId>{sp, byte_token(0xC3), byte_token(0xA9), byte_token('\t'),
                                  byte_token('\n')}));
  // A stray continuation byte and a truncated sequence are single bytes too.
  EXPECT_EQ(encode(*t, "\x80\xE2\x96"),
            (std::vector<TokenId>{sp, byte_token(0x80), byte_token(0xE2), byte_token(0x96)}));
}

TEST(SpmTokenizerTest, WithoutByteTokensUnknownBytesBecomeUnk) {
  VocabBuilder b;
  b.llama_layout(/*with_bytes=*/false);
  TokenId sp = b.add(kSp, -1.0f);
  auto t = b.build();
  EXPECT_EQ(encode(*t, "\xC3\xA9"), (std::vector<TokenId>{sp, 0, 0}));
}

TEST(SpmTokenizerTest, AddSpecialAddsBosAndEos) {
  VocabBuilder b;
  b.llama_layout();
  TokenId sp_x = b.add(kSp + "x", -2.0f);
  auto t = b.build();
  EXPECT_EQ(t->encode("x", true, false), (std::vector<TokenId>{1, sp_x}));
  EXPECT_EQ(t->encode("", true, false), (std::vector<TokenId>{1}));
  b.vocab.add_eos = true;
  b.vocab.add_bos = false;
  auto eos = b.build();
  EXPECT_EQ(eos->encode("x", true, false), (std::vector<TokenId>{sp_x, 2}));
  EXPECT_EQ(eos->encode("x", false, false), (std::vector<TokenId>{sp_x}));
}

TEST(SpmTokenizerTest, ParseSpecialSplitsControlTokens) {
  VocabBuilder b;
  b.llama_layout();
  TokenId sp = b.add(kSp, -1.0f);
  TokenId x = b.add("x");
  TokenId sp_x = b.add(kSp + "x", -2.0f);
  auto t = b.build();
  // The space prefix goes at the start of the text and, as in llama.cpp, at the start of raw text
  // that follows a special token; never before a special token.
  EXPECT_EQ(t->encode("<s>x</s>", false, true), (std::vector<TokenId>{1, sp_x, 2}));
  EXPECT_EQ(t->encode("x</s>x", false, true), (std::vector<TokenId>{sp_x, 2, sp_x}));
  EXPECT_EQ(t->encode("</s></s>", false, true), (std::vector<TokenId>{2, 2}));
  // Without parse_special the same text is plain text: bytes of '<', 's', '>' ...
  std::vector<TokenId> plain = t->encode("<s>", false, false);
  EXPECT_EQ(plain, (std::vector<TokenId>{sp, byte_token('<'), byte_token('s'), byte_token('>')}));
  (void)x;
}

TEST(SpmTokenizerTest, UserDefinedTokensAreAlwaysSplit) {
  VocabBuilder b;
  b.llama_layout();
  TokenId sp_x = b.add(kSp + "x", -2.0f);
  TokenId tag = b.add("<tag>", 0, TokenType::USER_DEFINED);
  auto t = b.build();
  EXPECT_EQ(t->encode("x<tag>x", false, false), (std::vector<TokenId>{sp_x, tag, sp_x}));
}

TEST(SpmTokenizerTest, LongerSpecialTokensWin) {
  VocabBuilder b;
  b.llama_layout();
  TokenId short_tag = b.add("<|a", 0, TokenType::CONTROL);
  TokenId long_tag = b.add("<|a|>", 0, TokenType::CONTROL);
  auto t = b.build();
  EXPECT_EQ(t->encode("<|a|><|a", false, true), (std::vector<TokenId>{long_tag, short_tag}));
}

TEST(SpmTokenizerTest, TokenToPiece) {
  VocabBuilder b;
  b.llama_layout();
  TokenId word = b.add(kSp + "a" + kSp + "b");
  TokenId user = b.add(kSp + "u", 0, TokenType::USER_DEFINED);
  TokenId unused = b.add("unused", 0, TokenType::UNUSED);
  auto t = b.build();
  EXPECT_EQ(t->token_to_piece(word), " a b");
  EXPECT_EQ(t->token_to_piece(byte_token(0x41)), "A");
  EXPECT_EQ(t->token_to_piece(byte_token(0xF0)), "\xF0");
  EXPECT_EQ(t->token_to_piece(byte_token(0x00)), std::string(1, '\0'));
  EXPECT_EQ(t->token_to_piece(1), "");  // CONTROL
  EXPECT_EQ(t->token_to_piece(1, /*render_special=*/true), "<s>");
  EXPECT_EQ(t->token_to_piece(0), "");  // UNKNOWN, as llama.cpp (SentencePiece prints " ⁇ ")
  EXPECT_EQ(t->token_to_piece(0, true), "<unk>");
  EXPECT_EQ(t->token_to_piece(user), kSp + "u");  // USER_DEFINED: the text as is
  EXPECT_EQ(t->token_to_piece(unused), "");
  EXPECT_EQ(t->token_to_piece(-1), "");
  EXPECT_EQ(t->token_to_piece(b.vocab.size()), "");
}

TEST(SpmTokenizerTest, DecodeConcatenatesPiecesKeepingThePrefixSpace) {
  VocabBuilder b;
  b.llama_layout();
  b.add(kSp, -1.0f);
  b.add(kSp + "x", -2.0f);
  auto t = b.build();
  std::vector<TokenId> ids = t->encode("x \xC3\xA9", true, false);
  EXPECT_EQ(t->decode(ids), " x \xC3\xA9");
  EXPECT_EQ(t->decode(ids, /*render_special=*/true), "<s> x \xC3\xA9");
}

TEST(SpmTokenizerTest, DuplicateTextsResolveToTheLastId) {
  VocabBuilder b;
  b.vocab.add_space_prefix = false;
  b.add("a");
  TokenId second = b.add("a");
  auto t = b.build();
  EXPECT_EQ(encode(*t, "a"), (std::vector<TokenId>{second}));
}

TEST(SpmTokenizerTest, CreateRejectsBadVocabs) {
  VocabBuilder bad_byte;
  bad_byte.add("<0xZZ>", 0, TokenType::BYTE);
  EXPECT_FALSE(Tokenizer::create(bad_byte.vocab).ok());

  VocabBuilder short_types;
  short_types.add("a");
  short_types.vocab.types.clear();
  EXPECT_FALSE(Tokenizer::create(short_types.vocab).ok());

  VocabBuilder bad_bos;
  bad_bos.add("a");
  bad_bos.vocab.bos_id = 5;
  EXPECT_FALSE(Tokenizer::create(bad_bos.vocab).ok());

  VocabBuilder bos_missing;
  bos_missing.add("a");
  bos_missing.vocab.add_bos = true;
  EXPECT_FALSE(Tokenizer::create(bos_missing.vocab).ok());

  EXPECT_FALSE(Tokenizer::create(Vocab{}).ok());
}

TEST(SpmTokenizerTest, ConcurrentEncodesAgree) {
  VocabBuilder b;
  b.llama_layout();
  b.add(kSp, -1.0f);
  b.add("ab", -2.0f);
  b.add(kSp + "ab", -3.0f);
  b.add("abab", -1.5f);
  auto t = b.build();
  std::string text;
  for (int i = 0; i < 200; ++i) text += (i % 3 == 0) ? "ab " : "abab\xC3\xA9";
  const std::vector<TokenId> expected = t->encode(text, true, true);
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int round = 0; round < 50; ++round) {
        if (t->encode(text, true, true) != expected) ++mismatches[k];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

TEST(SpmTokenizerTest, SharedLlamaSpmExamples) {
  TRELLIS_REQUIRE_SHARED();
  Result<GgufFile> file =
      GgufFile::open(testing::shared_dir() + "/tokenizer-vectors/ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(file.ok()) << file.error().message;
  Result<Vocab> vocab = load_vocab(*file);
  ASSERT_TRUE(vocab.ok()) << vocab.error().message;
  Result<std::unique_ptr<Tokenizer>> t = Tokenizer::create(std::move(*vocab));
  ASSERT_TRUE(t.ok()) << t.error().message;
  // From the vectors README: "Hello world" -> 15043 3186, " Hello world" -> 29871 15043 3186.
  EXPECT_EQ((*t)->encode("Hello world", false, false), (std::vector<TokenId>{15043, 3186}));
  EXPECT_EQ((*t)->encode(" Hello world", false, false), (std::vector<TokenId>{29871, 15043, 3186}));
  EXPECT_EQ((*t)->encode("Hello world", true, false), (std::vector<TokenId>{1, 15043, 3186}));
  // parse_special: <s> becomes BOS, and the text after it gets the space prefix.
  EXPECT_EQ((*t)->encode("<s>Hello world", false, true), (std::vector<TokenId>{1, 15043, 3186}));
}

}  // namespace
}  // namespace trellis
