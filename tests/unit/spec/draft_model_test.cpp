// The draft model's bookkeeping: which positions of a sequence hold its KV (per block, for the
// generation the pool handed the block out in), and the vocabulary check; and its guesses, which
// for the target's own file are the target's greedy tokens.
#include "spec/draft_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "engine/model_runtime.h"
#include "test_support.h"

namespace trellis {
namespace {

constexpr int32_t kBlockSize = 4;

struct Fixture {
  LoadedModel target;
  BlockPool pool{16};
  ThreadPool threads{2};
  std::unique_ptr<GgufFile> draft_file;  // the draft's weights, destroyed after it
  std::unique_ptr<DraftModel> draft;
};

std::unique_ptr<Fixture> make_fixture() {
  auto f = std::make_unique<Fixture>();
  Result<LoadedModel> target = load_model(testing::tiny_engine_model());
  EXPECT_TRUE(target.ok()) << target.error().message;
  if (!target.ok()) return nullptr;
  f->target = std::move(target).value();
  Result<LoadedModel> draft = load_model(testing::tiny_engine_model());
  EXPECT_TRUE(draft.ok());
  if (!draft.ok()) return nullptr;
  DraftModelShape shape;
  shape.block_size = kBlockSize;
  shape.n_ctx = 64;
  shape.max_rows = 8;
  shape.max_seqs = 4;
  f->draft_file = std::move(draft->file);
  Result<std::unique_ptr<DraftModel>> made =
      DraftModel::create(std::move(draft->model), f->pool, f->threads, shape);
  EXPECT_TRUE(made.ok()) << made.error().message;
  if (!made.ok()) return nullptr;
  f->draft = std::move(made).value();
  return f;
}

TEST(DraftModelTest, ConfirmedRowsArePerBlockAndForgottenWhenTheBlockIsHandedOutAgain) {
  std::unique_ptr<Fixture> f = make_fixture();
  ASSERT_NE(f, nullptr);
  std::vector<BlockId> table;
  f->pool.alloc(3, table);
  EXPECT_EQ(f->draft->computed_prefix(table, 12), 0);
  f->draft->confirm(table, 0, 6);
  EXPECT_EQ(f->draft->computed_prefix(table, 12), 6);
  EXPECT_EQ(f->draft->computed_prefix(table, 5), 5);  // never past the positions asked about
  f->draft->confirm(table, 9, 11);  // the third block's rows 1, 2 after a gap: unknown
  EXPECT_EQ(f->draft->computed_prefix(table, 12), 6);
  f->draft->confirm(table, 6, 9);
  EXPECT_EQ(f->draft->computed_prefix(table, 12), 9);
  // The second block goes back to the pool and comes out again (most recently freed first):
  // what the draft wrote there belongs to its earlier holder.
  f->pool.release(table[1]);
  std::vector<BlockId> again;
  f->pool.alloc(1, again);
  ASSERT_EQ(again[0], table[1]);
  EXPECT_EQ(f->draft->computed_prefix(table, 12), kBlockSize);
}

// Greedy decoding of the target itself, one token per forward pass, from its own KV.
std::vector<TokenId> greedy_continuation(const Model& model, const std::vector<TokenId>& prompt,
                                         int n) {
  Result<KvStorage> kv = KvStorage::create(model.kv_layout(kBlockSize, KvTypes{}), 16);
  EXPECT_TRUE(kv.ok());
  std::vector<int32_t> table;
  for (int32_t b = 0; b < 16; ++b) table.push_back(b);
  Workspace ws(model.hparams(), 64);
  ThreadPool pool(2);
  ws.attention_scratch.reserve(pool.size(), kv->layout(), model.hparams().n_head, 64,
                               ws.max_rows());
  std::vector<float> logits(static_cast<size_t>(model.hparams().n_vocab));
  std::vector<TokenId> tokens = prompt;
  for (int i = 0; i < n; ++i) {
    ForwardBatch batch;
    const auto first = static_cast<int32_t>(i == 0 ? 0 : tokens.size() - 1);
    batch.add_sequence(tokens.data() + first, static_cast<int32_t>(tokens.size()) - first, first,
                       table, 1);
    model.forward(batch, *kv, ws, pool, logits.data());
    tokens.push_back(
        static_cast<TokenId>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
  }
  return {tokens.end() - n, tokens.end()};
}

TEST(DraftModelTest, TheTargetsOwnFileGuessesItsGreedyTokensForSequencesSharingBlocks) {
  std::unique_ptr<Fixture> f = make_fixture();
  ASSERT_NE(f, nullptr);
  const std::vector<TokenId> prompt = {1, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140};
  const std::vector<TokenId> expected = greedy_continuation(*f->target.model, prompt, 6);
  // Two sequences of the same prompt: the first two blocks shared, the rest their own (as the
  // prefix cache would hand them out). The prompt needs more rows than a pass holds.
  std::vector<BlockId> shared;
  f->pool.alloc(2, shared);
  std::vector<std::vector<BlockId>> tables(2, shared);
  for (std::vector<BlockId>& t : tables) f->pool.alloc(3, t);
  std::vector<std::vector<TokenId>> out(2, std::vector<TokenId>(5));
  std::vector<DraftJob> jobs;
  for (size_t j = 0; j < 2; ++j) jobs.push_back({prompt, tables[j], 5, out[j].data()});
  f->draft->draft(jobs);
  for (size_t j = 0; j < 2; ++j) {
    EXPECT_EQ(out[j], std::vector<TokenId>(expected.begin(), expected.begin() + 5)) << j;
    EXPECT_EQ(f->draft->computed_prefix(tables[j], 20), static_cast<int32_t>(prompt.size()));
  }
  // The shared blocks were computed once: 2 x 11 prompt rows less the 8 shared, plus 2 x 4
  // guesses' rows.
  EXPECT_EQ(f->draft->n_rows_computed(), 2 * 11 - 8 + 2 * 4);
}

TEST(DraftModelTest, RefusesAnotherVocabulary) {
  Result<LoadedModel> model = load_model(testing::tiny_engine_model());
  ASSERT_TRUE(model.ok()) << model.error().message;
  const Tokenizer& tokenizer = *model->tokenizer;
  EXPECT_TRUE(check_same_vocab(tokenizer, tokenizer).ok());
  Vocab renamed = tokenizer.vocab();
  const auto normal =
      static_cast<size_t>(std::find(renamed.types.begin(), renamed.types.end(), TokenType::NORMAL) -
                          renamed.types.begin());
  ASSERT_LT(normal, renamed.tokens.size());
  renamed.tokens[normal] += "x";
  Result<std::unique_ptr<Tokenizer>> other = Tokenizer::create(renamed);
  ASSERT_TRUE(other.ok()) << other.error().message;
  const Status differs = check_same_vocab(**other, tokenizer);
  ASSERT_FALSE(differs.ok());
  EXPECT_NE(differs.error().message.find("token " + std::to_string(normal)), std::string::npos)
      << differs.error().message;
  Vocab shorter = tokenizer.vocab();
  shorter.tokens.pop_back();
  shorter.types.pop_back();
  if (!shorter.scores.empty()) shorter.scores.pop_back();
  Result<std::unique_ptr<Tokenizer>> fewer = Tokenizer::create(shorter);
  ASSERT_TRUE(fewer.ok()) << fewer.error().message;
  EXPECT_FALSE(check_same_vocab(**fewer, tokenizer).ok());
}

}  // namespace
}  // namespace trellis
