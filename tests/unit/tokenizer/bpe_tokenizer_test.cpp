// Byte-level BPE on small hand-built vocabs: merge order, ignore_merges, special tokens, pieces.
#include "tokenizer/bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/bpe_model.h"
#include "tokenizer/byte_unicode.h"

namespace trellis {
namespace {

// A vocab whose first 256 tokens are the byte tokens (id == byte value), followed by the results
// of `merges` (given in raw bytes, e.g. {" ", "w"}), then any extra tokens.
class VocabBuilder {
 public:
  explicit VocabBuilder(std::string pre = "gpt-2") {
    vocab_.kind = TokenizerKind::BPE;
    vocab_.model = "gpt2";
    vocab_.pre = std::move(pre);
    for (int byte = 0; byte < 256; ++byte) {
      add(bytes_to_unicode(std::string(1, static_cast<char>(byte))), TokenType::NORMAL);
    }
  }

  // Adds the merge left+right (raw bytes) and its result token if new; returns the result's id.
  TokenId merge(const std::string& left, const std::string& right) {
    vocab_.merges.push_back(bytes_to_unicode(left) + " " + bytes_to_unicode(right));
    return find_or_add(bytes_to_unicode(left + right));
  }

  TokenId add(const std::string& text, TokenType type) {
    vocab_.tokens.push_back(text);
    vocab_.types.push_back(type);
    return vocab_.size() - 1;
  }

  TokenId find_or_add(const std::string& text) {
    for (TokenId id = 0; id < vocab_.size(); ++id) {
      if (vocab_.tokens[id] == text) return id;
    }
    return add(text, TokenType::NORMAL);
  }

  Vocab& vocab() { return vocab_; }

  std::unique_ptr<Tokenizer> build() {
    Result<std::unique_ptr<Tokenizer>> tokenizer = make_bpe_tokenizer(vocab_);
    EXPECT_TRUE(tokenizer.ok()) << tokenizer.error().message;
    return tokenizer.ok() ? std::move(tokenizer).value() : nullptr;
  }

 private:
  Vocab vocab_;
};

std::vector<TokenId> encode(const Tokenizer& tokenizer, std::string_view text) {
  return tokenizer.encode(text, /*add_special=*/false, /*parse_special=*/false);
}

std::string decode(const Tokenizer& tokenizer, const std::vector<TokenId>& ids) {
  std::string out;
  for (TokenId id : ids) out += tokenizer.token_to_piece(id);
  return out;
}

using Ids = std::vector<TokenId>;

TEST(BpeTokenizerTest, WithoutMergesEveryByteIsAToken) {
  VocabBuilder builder;
  auto tokenizer = builder.build();
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(encode(*tokenizer, "hi \xC3\xA9"), (Ids{'h', 'i', ' ', 0xC3, 0xA9}));
  EXPECT_EQ(encode(*tokenizer, ""), Ids{});
}

TEST(BpeTokenizerTest, MergesApplyLowestRankFirst) {
  // "abc" with "b c" ranked before "a b" gives a|bc; the other order gives ab|c.
  VocabBuilder bc_first;
  TokenId bc = bc_first.merge("b", "c");
  bc_first.merge("a", "b");
  auto tokenizer = bc_first.build();
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(encode(*tokenizer, "abc"), (Ids{'a', bc}));

  VocabBuilder ab_first;
  TokenId ab = ab_first.merge("a", "b");
  ab_first.merge("b", "c");
  tokenizer = ab_first.build();
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(encode(*tokenizer, "abc"), (Ids{ab, 'c'}));
}

TEST(BpeTokenizerTest, EqualRanksMergeLeftmostFirst) {
  VocabBuilder builder;
  TokenId aa = builder.merge("a", "a");
  auto tokenizer = builder.build();
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(encode(*tokenizer, "aaa"), (Ids{aa, 'a'}));
  EXPECT_EQ(encode(*tokenizer, "aaaa"), (Ids{aa, aa}));
}

TEST(BpeTokenizerTest, MergesBuildWholeWordsAndStopAtPreTokenBoundaries) {
  VocabBuilder builder;
  builder.merge("h", "e");
  builder.merge("l", "l");
  builder.merge("he", "ll");
  TokenId hello = builder.merge("hell", "o");
  TokenId space_w = builder.merge(" ", "w");
  builder.merge("o", "r");
  builder.merge(" w", "or");
  builder.merge(" wor", "l");
  TokenId space_world = builder.merge(" worl", "d");
  // "o w" would merge across the word boundary if the pre-tokenizer did not stop it.
  builder.merge("o", " ");
  auto tokenizer = builder.build();
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(encode(*tokenizer, "hello world"), (Ids{hello, space_world}));
  EXPECT_EQ(encode(*tokenizer, "hello w"), (Ids{hello, space_w}));
  EXPECT_EQ(decode(*tokenizer, encode(*tokenizer, "hello world")), "hello world");
}

TEST(BpeTokenizerTest, IgnoreMergesEmitsWholePieceTokensForLlama3) {
  // "abc" is a token that the merges cannot reach (they build "ab" and stop).
  for (const char* pre : {"gpt-2", "llama-bpe"}) {
    VocabBuilder builder(pre);
    TokenId ab = builder.merge("a", "b");
    TokenId abc = builder.add("abc", TokenType::NORMAL);
    auto tokenizer = builder.build();
    ASSERT_NE(tokenizer, nullptr);
    Ids expected = std::string(pre) == "llama-bpe" ? Ids{abc} : Ids{ab, 'c'};
    EXPECT_EQ(encode(*tokenizer, "abc"), expected) << pre;
  }
}

TEST(BpeTokenizerTest, MultiByteCharactersMergeFromTheirBytes) {
  VocabBuilder builder;
  TokenId e_acute = builder.merge("\xC3", "\xA9");
  auto tokenizer = builder.build();
  ASSERT_NE(tokenizer, nullptr);
  Ids ids = encode(*tokenizer, "caf\xC3\xA9 \xF0\x9F\xA6\x99");
  EXPECT_EQ(ids, (Ids{'c', 'a', 'f', e_acute, ' ', 0xF0, 0x9F, 0xA6, 0x99}));
  EXPECT_EQ(decode(*tokenizer, ids), "caf\xC3\xA9 \xF0\x9F\xA6\x99");
}

TEST(BpeTokenizerTest, EveryByteStringRoundTrips) {
  VocabBuilder builder;
  builder.merge(" ", "t");
  builder.merge("h", "e");
  builder.merge(" t", "he");
  auto tokenizer = builder.build();
  ASSERT_NE(tokenizer, nullptr);
  std::string text;
  for (int byte = 255; byte >= 0; --byte) text.push_back(static_cast<char>(byte));
  text += " the \xFF\xFE invalid \xC3 utf8";
  EXPECT_EQ(decode(*tokenizer, encode(*tokenizer, text)), text);
}

TEST(BpeTokenizerTest, ControlTokensNeedParseSpecialUserDefinedDoNot) {
  VocabBuilder builder;
  TokenId end = builder.add("<|end|>", TokenType::CONTROL);
  TokenId user = builder.add("<user>", TokenType::USER_DEFINED);
  TokenId spaces = builder.add("   ", TokenType::USER_DEFINED);
  auto tokenizer = builder.build();
  ASSERT_NE(tokenizer, nullptr);

  Ids plain = tokenizer->encode("a<|end|>", false, /*parse_special=*/false);
  EXPECT_EQ(plain, (Ids{'a', '<', '|', 'e', 'n', 'd', '|', '>'}));
  Ids special = tokenizer->encode("a<|end|>", false, /*parse_special=*/true);
  EXPECT_EQ(special, (Ids{'a', end}));

  // User-defined tokens are split out either way (as HF does for added tokens).
  EXPECT_EQ(tokenizer->encode("x<user>y", false, false), (Ids{'x', user, 'y'}));
  EXPECT_EQ(tokenizer->encode("x<user>y", false, true), (Ids{'x', user, 'y'}));
  EXPECT_EQ(tokenizer->encode("    a", false, false), (Ids{spaces, ' ', 'a'}));
}

TEST(BpeTokenizerTest, LongestSpecialTokenWins) {
  VocabBuilder builder;
  TokenId short_token = builder.add("<a>", TokenType::CONTROL);
  TokenId long_token = builder.add("<a><b>", TokenType::CONTROL);
  auto tokenizer = builder.build();
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->encode("<a><b><a>", false, true), (Ids{long_token, short_token}));
}

TEST(BpeTokenizerTest, AddSpecialFollowsTheVocabFlags) {
  VocabBuilder builder;
  TokenId bos = builder.add("<s>", TokenType::CONTROL);
  TokenId eos = builder.add("</s>", TokenType::CONTROL);
  builder.vocab().bos_id = bos;
  builder.vocab().eos_id = eos;
  builder.vocab().add_bos = true;
  builder.vocab().add_eos = false;
  auto tokenizer = builder.build();
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->encode("a", /*add_special=*/true, false), (Ids{bos, 'a'}));
  EXPECT_EQ(tokenizer->encode("a", /*add_special=*/false, false), (Ids{'a'}));

  builder.vocab().add_bos = false;
  builder.vocab().add_eos = true;
  tokenizer = builder.build();
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->encode("a", /*add_special=*/true, false), (Ids{'a', eos}));
}

TEST(BpeTokenizerTest, TokenToPieceUndoesTheByteMapping) {
  VocabBuilder builder;
  TokenId space_w = builder.merge(" ", "w");
  TokenId control = builder.add("<|end|>", TokenType::CONTROL);
  TokenId user = builder.add("<user> \xC3\xA9", TokenType::USER_DEFINED);
  auto tokenizer = builder.build();
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->token_to_piece(space_w), " w");
  EXPECT_EQ(tokenizer->token_to_piece('\n'), "\n");
  EXPECT_EQ(tokenizer->token_to_piece(0xFF), "\xFF");
  EXPECT_EQ(tokenizer->token_to_piece(control), "");
  EXPECT_EQ(tokenizer->token_to_piece(control, /*render_special=*/true), "<|end|>");
  EXPECT_EQ(tokenizer->token_to_piece(user), "<user> \xC3\xA9");
  EXPECT_EQ(tokenizer->token_to_piece(-1), "");
  EXPECT_EQ(tokenizer->token_to_piece(tokenizer->vocab().size()), "");
}

TEST(BpeTokenizerTest, UnknownPreTypeIsAnError) {
  VocabBuilder builder("my-new-model");
  Result<std::unique_ptr<Tokenizer>> tokenizer = make_bpe_tokenizer(builder.vocab());
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_NE(tokenizer.error().message.find("'my-new-model'"), std::string::npos)
      << tokenizer.error().message;
}

TEST(BpeTokenizerTest, MergeNamingAnUnknownTokenIsAnError) {
  VocabBuilder builder;
  builder.vocab().merges.push_back("x \xE2\x82\xAC");  // U+20AC is not a token
  Result<std::unique_ptr<Tokenizer>> tokenizer = make_bpe_tokenizer(builder.vocab());
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_NE(tokenizer.error().message.find("merge #0"), std::string::npos)
      << tokenizer.error().message;

  VocabBuilder no_space;
  no_space.vocab().merges.push_back("ab");
  EXPECT_FALSE(make_bpe_tokenizer(no_space.vocab()).ok());
}

TEST(BpeTokenizerTest, SpmVocabIsRejected) {
  VocabBuilder builder;
  builder.vocab().kind = TokenizerKind::SPM;
  EXPECT_FALSE(make_bpe_tokenizer(builder.vocab()).ok());
}

TEST(BpeTokenizerTest, LongPieceMergesInNearLinearTime) {
  // One pre-token of 200k letters, where every adjacent pair can merge (the adversarial case for
  // a merge loop that rescans the piece after each merge: ~n^2 / 2 lookups). Instead of timing
  // it (the tests also run under sanitizers at -O0), count the work: each applied merge pushes
  // at most two new candidates, so the heap sees fewer than 3n entries.
  VocabBuilder builder;
  TokenId aa = builder.merge("a", "a");
  TokenId aaaa = builder.merge("aa", "aa");
  auto tokenizer = builder.build();
  ASSERT_NE(tokenizer, nullptr);
  const std::string text = std::string(200000, 'a') + "aa";
  Ids ids = encode(*tokenizer, text);
  ASSERT_EQ(ids.size(), 50001u);
  EXPECT_EQ(ids.front(), aaaa);
  EXPECT_EQ(ids.back(), aa);

  Result<BpeModel> model = BpeModel::build(builder.vocab(), {});
  ASSERT_TRUE(model.ok()) << model.error().message;
  const auto n = static_cast<int64_t>(text.size());
  Ids direct;
  BpeModel::Work work;
  model->encode_piece(text, direct, &work);
  EXPECT_EQ(direct, ids);
  // 100001 "a a" merges, then 50000 "aa aa" merges: n - 1 - (number of tokens - 1) merges.
  EXPECT_EQ(work.n_merges, n - static_cast<int64_t>(ids.size()));
  EXPECT_LE(work.n_candidates, (n - 1) + 2 * work.n_merges);
  EXPECT_LT(work.n_candidates, 3 * n);
}

TEST(BpeModelTest, FindsTokensAndCountsMerges) {
  VocabBuilder builder;
  TokenId ab = builder.merge("a", "b");
  Result<BpeModel> model = BpeModel::build(builder.vocab(), {});
  ASSERT_TRUE(model.ok()) << model.error().message;
  EXPECT_EQ(model->find_token("ab"), ab);
  EXPECT_EQ(model->find_token("\xC4\xA0"), ' ');  // 'Ġ' is the space byte's token
  EXPECT_EQ(model->find_token("zz"), kNoToken);
  EXPECT_EQ(model->n_merges(), 1);
}

}  // namespace
}  // namespace trellis
