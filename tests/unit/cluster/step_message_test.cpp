// A step's message decodes to micro-batches that, laid end to end, are the step: the same rows,
// positions and block tables, the same output rows in the same order; and the block copies.
// Truncated or out-of-range messages are refused.
#include "cluster/step_message.h"

#include <gtest/gtest.h>

namespace trellis {
namespace {

struct Step {
  std::vector<std::vector<int32_t>> tables{{4, 7}, {1}, {2, 3, 5}};
  std::vector<TokenId> tokens{10, 11, 12, 13, 14, 15, 16, 17, 18};
  ForwardBatch batch;
  Step() {
    batch.add_sequence(tokens.data(), 5, 27, tables[0], 1);     // prefill chunk, logits at the end
    batch.add_sequence(tokens.data() + 5, 1, 9, tables[1], 1);  // decode
    batch.add_sequence(tokens.data() + 6, 3, 40, tables[2], 3); // every row's logits
  }
};

TEST(StepMessage, MicroBatchesLaidEndToEndAreTheStep) {
  Step step;
  const std::vector<BlockCopy> copies{{1, 6, 5}, {2, 0, 16}};
  for (int32_t n_micro = 1; n_micro <= 12; ++n_micro) {
    std::vector<int32_t> words;
    encode_step(step.batch, copies, n_micro, words);
    ASSERT_EQ(words[0], static_cast<int32_t>(StageCommand::STEP));
    DecodedStep decoded;
    Status status = decode_step(std::span<const int32_t>(words).subspan(1), 8, 16, decoded);
    ASSERT_TRUE(status.ok()) << status.error().message;
    ASSERT_EQ(decoded.copies.size(), 2u);
    EXPECT_EQ(decoded.copies[1].dst, 0);
    EXPECT_EQ(decoded.copies[1].n_slots, 16);
    EXPECT_EQ(static_cast<int32_t>(decoded.micro.size()), std::min(n_micro, 9));
    std::vector<TokenId> tokens;
    std::vector<int32_t> positions, outputs, tables_of_rows;
    int32_t row0 = 0;
    for (const MicroBatch& mb : decoded.micro) {
      const ForwardBatch& b = mb.batch;
      tokens.insert(tokens.end(), b.tokens.begin(), b.tokens.end());
      positions.insert(positions.end(), b.positions.begin(), b.positions.end());
      for (int32_t r : b.output_rows) outputs.push_back(row0 + r);
      for (const BatchSequence& s : b.sequences) {
        for (int32_t r = s.row_begin; r < s.row_end; ++r) tables_of_rows.push_back(s.block_table[0]);
      }
      row0 += b.n_rows();
    }
    EXPECT_EQ(tokens, step.batch.tokens);
    EXPECT_EQ(positions, step.batch.positions);
    EXPECT_EQ(outputs, step.batch.output_rows);
    EXPECT_EQ(tables_of_rows, (std::vector<int32_t>{4, 4, 4, 4, 4, 1, 2, 2, 2}));
  }
}

TEST(StepMessage, RefusesMalformedMessages) {
  Step step;
  std::vector<int32_t> words;
  encode_step(step.batch, {}, 2, words);
  const std::span<const int32_t> body = std::span<const int32_t>(words).subspan(1);
  DecodedStep decoded;
  ASSERT_TRUE(decode_step(body, 8, 16, decoded).ok());
  for (size_t cut = 0; cut < body.size(); ++cut)
    EXPECT_FALSE(decode_step(body.first(cut), 8, 16, decoded).ok()) << "cut at " << cut;
  EXPECT_FALSE(decode_step(body, 7, 16, decoded).ok());  // block 7 is outside a 7-block pool
  EXPECT_FALSE(decode_step(body, 8, 4, decoded).ok());   // a micro-batch larger than the workspace
  std::vector<int32_t> longer(body.begin(), body.end());
  longer.push_back(0);
  EXPECT_FALSE(decode_step(longer, 8, 16, decoded).ok());
}

}  // namespace
}  // namespace trellis
