// Token masks from the trie walk, checked against the brute-force definition (a token is allowed
// iff the automaton accepts all of its bytes), on a tiny vocab and on real 32k-152k vocabularies.
#include "grammar/token_grammar.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "grammar/gbnf.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace trellis {
namespace {

std::shared_ptr<const Grammar> compile(const std::string& text) {
  Result<Grammar> grammar = parse_gbnf(text);
  EXPECT_TRUE(grammar.ok()) << (grammar.ok() ? "" : grammar.error().message);
  return grammar.ok() ? std::make_shared<const Grammar>(std::move(grammar).value()) : nullptr;
}

// The definition the walk must agree with, token by token.
void expect_mask_is_exact(TokenGrammar& tg, TokenGrammar::StateId state) {
  const TokenMask mask = tg.mask(state);
  int32_t n_allowed = 0;
  for (TokenId id = 0; id < tg.trie().vocab_size(); ++id) {
    const std::string_view piece = tg.trie().piece(id);
    const bool expected = !piece.empty() && tg.advance_bytes(state, piece) >= 0;
    ASSERT_EQ(mask_allows(mask, id), expected) << "token " << id << " '" << piece << "'";
    n_allowed += expected;
  }
  EXPECT_GT(n_allowed, 0);
}

TEST(TokenGrammarTest, TinyVocabMasksAndAdvances) {
  const std::vector<std::string_view> pieces = {"a",  "b", "ab", "abc", "{",   "}",
                                                "\"", "",  "x",  "c}",  "bc}", "ab"};
  auto trie = std::make_shared<const TokenTrie>(pieces);
  EXPECT_EQ(trie->n_nodes(), 12u);  // a ab abc, b bc bc}, c c}, x, {, }, ": prefixes shared
  TokenGrammar tg(compile(R"(root ::= "ab" "c"? "}")"), trie);
  const auto s0 = tg.initial();
  const TokenMask& m0 = tg.mask(s0);
  EXPECT_TRUE(mask_allows(m0, 0));    // a
  EXPECT_TRUE(mask_allows(m0, 2));    // ab
  EXPECT_TRUE(mask_allows(m0, 11));   // ab (a duplicate piece)
  EXPECT_TRUE(mask_allows(m0, 3));    // abc
  EXPECT_FALSE(mask_allows(m0, 1));   // b
  EXPECT_FALSE(mask_allows(m0, 7));   // the empty piece
  const auto s1 = tg.advance(s0, 0);  // "a"
  const TokenMask& m1 = tg.mask(s1);
  EXPECT_TRUE(mask_allows(m1, 1));   // b
  EXPECT_TRUE(mask_allows(m1, 10));  // bc}
  EXPECT_FALSE(mask_allows(m1, 2));  // ab
  const auto done = tg.advance(s1, 10);
  EXPECT_TRUE(tg.is_accepting(done));
  EXPECT_TRUE(tg.is_final(done));
  expect_mask_is_exact(tg, s0);
  expect_mask_is_exact(tg, s1);
  EXPECT_EQ(tg.stats().n_masks_computed, 2);  // the exactness checks hit the cache
  EXPECT_EQ(tg.forced_byte(s0), 'a');
}

TEST(TokenGrammarTest, MaskCacheDropsTheLeastRecentlyUsed) {
  const std::vector<std::string_view> pieces = {"a", "b", "c", "ab"};
  auto trie = std::make_shared<const TokenTrie>(pieces);
  TokenGrammar tg(compile(R"(root ::= "a" "b" "c" "a")"), trie, 1 << 16, /*max_cached_masks=*/2);
  const auto s0 = tg.initial();
  const auto s1 = tg.advance(s0, 0);  // after "a"
  const auto s2 = tg.advance(s1, 1);  // after "ab"
  (void)tg.mask(s0);
  (void)tg.mask(s1);
  (void)tg.mask(s0);  // s0 used again: s1 is now the least recent
  (void)tg.mask(s2);  // evicts s1
  EXPECT_EQ(tg.stats().n_masks_computed, 3);
  (void)tg.mask(s0);  // still cached
  EXPECT_EQ(tg.stats().n_masks_computed, 3);
  (void)tg.mask(s1);  // computed again
  EXPECT_EQ(tg.stats().n_masks_computed, 4);
  EXPECT_TRUE(mask_allows(tg.mask(s1), 1));
}

TEST(TokenGrammarTest, ApplyMaskRefusesExactlyTheMaskedTokens) {
  TokenMask mask(2, 0);
  mask[0] = 0b1010;
  mask[1] = uint64_t{1} << 5;  // token 69
  std::vector<float> logits(70, 1.0f);
  apply_token_mask(logits, mask);
  for (size_t id = 0; id < logits.size(); ++id) {
    const bool allowed = id == 1 || id == 3 || id == 69;
    EXPECT_EQ(logits[id] == 1.0f, allowed) << id;
  }
}

struct LoadedVocab {
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<std::string_view> pieces;
};

LoadedVocab load(const std::string& name) {
  LoadedVocab out;
  const std::string path =
      testing::shared_dir() + "/tokenizer-vectors/ggml-vocab-" + name + ".gguf";
  Result<GgufFile> file = GgufFile::open(path);
  EXPECT_TRUE(file.ok()) << path;
  if (!file.ok()) return out;
  Result<Vocab> vocab = load_vocab(*file);
  EXPECT_TRUE(vocab.ok());
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::create(std::move(*vocab));
  EXPECT_TRUE(tokenizer.ok());
  out.tokenizer = std::move(tokenizer).value();
  for (TokenId id = 0; id < out.tokenizer->vocab().size(); ++id)
    out.pieces.push_back(out.tokenizer->piece(id));
  return out;
}

// Walks a JSON-shaped grammar token by token on a real vocabulary, each step taking the allowed
// token with the longest piece (ties: lowest id), checking every mask against the definition.
void walk_real_vocab(const std::string& name) {
  LoadedVocab vocab = load(name);
  ASSERT_TRUE(vocab.tokenizer);
  auto trie = std::make_shared<const TokenTrie>(vocab.pieces);
  TokenGrammar tg(compile(R"(
      root ::= "{\"name\":\"" [^"\\\x00-\x1F]{1,12} "\",\"age\":" [1-9] [0-9]? ",\"tags\":[" tags "]}"
      tags ::= "\"" [a-z]{1,8} "\"" ("," "\"" [a-z]{1,8} "\"")?
  )"),
                  trie);
  auto state = tg.initial();
  std::string text;
  int n_steps = 0;
  double worst_ms = 0;
  while (!tg.is_final(state)) {
    const auto start = std::chrono::steady_clock::now();
    const TokenMask mask = tg.mask(state);
    worst_ms =
        std::max(worst_ms,
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
    if (n_steps < 6) expect_mask_is_exact(tg, state);
    TokenId best = kNoToken;
    for (TokenId id = 0; id < trie->vocab_size(); ++id)
      if (mask_allows(mask, id) &&
          (best == kNoToken || trie->piece(id).size() > trie->piece(best).size()))
        best = id;
    ASSERT_NE(best, kNoToken) << "no token continues \"" << text << "\"";
    text += trie->piece(best);
    state = tg.advance(state, best);
    ASSERT_GE(state, 0);
    ASSERT_LT(++n_steps, 200);
  }
  EXPECT_TRUE(grammar_accepts(std::make_shared<const Grammar>(tg.automaton().grammar()), text))
      << text;
  std::printf("%s: %d tokens, %d trie nodes, %lld masks in %.1f ms (worst %.2f ms): %s\n",
              name.c_str(), n_steps, static_cast<int>(trie->n_nodes()),
              static_cast<long long>(tg.stats().n_masks_computed), tg.stats().compute_ms, worst_ms,
              text.c_str());
}

TEST(TokenGrammarTest, RealVocabularies) {
  TRELLIS_REQUIRE_SHARED();
  for (const char* name : {"qwen2", "llama-bpe", "llama-spm", "phi-3"}) {
    SCOPED_TRACE(name);
    walk_real_vocab(name);
  }
}

}  // namespace
}  // namespace trellis
