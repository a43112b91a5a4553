// The Q4_K_M / Q5_K_M type mixes: the rules on their own, and against the types llama.cpp's
// quantizer chose for the Q4_K_M files in ../shared/reference-arch.
#include "model/quant_mix.h"

#include <gtest/gtest.h>

#include <string>

#include "gguf/gguf_file.h"
#include "test_support.h"

namespace trellis {
namespace {

TEST(QuantMix, ParsesNamesAndCodes) {
  EXPECT_EQ(parse_quant_mix("q4_k_m"), QuantMix::Q4_K_M);
  EXPECT_EQ(parse_quant_mix("Q5_K_M"), QuantMix::Q5_K_M);
  EXPECT_FALSE(parse_quant_mix("q4_k").has_value());
  EXPECT_EQ(quant_mix_base(QuantMix::Q4_K_M), DType::Q4_K);
  EXPECT_EQ(quant_mix_base(QuantMix::Q5_K_M), DType::Q5_K);
  EXPECT_EQ(quant_mix_file_type(QuantMix::Q4_K_M), 15u);
  EXPECT_EQ(quant_mix_file_type(QuantMix::Q5_K_M), 17u);
  EXPECT_EQ(parse_quant_mix("MXFP4_MOE"), QuantMix::MXFP4_MOE);
  EXPECT_EQ(quant_mix_base(QuantMix::MXFP4_MOE), DType::MXFP4);
  EXPECT_EQ(quant_mix_file_type(QuantMix::MXFP4_MOE), 38u);
}

TEST(QuantMix, Mxfp4MoeQuantizesTheExpertsToMxfp4AndTheRestToQ8_0) {
  const QuantMix m = QuantMix::MXFP4_MOE;
  // gpt-oss-20b's rows of 2880 values: 90 blocks of 32, no K blocks.
  EXPECT_EQ(quant_mix_type(m, "blk.3.ffn_gate_exps.weight", 2880, 24, false), DType::MXFP4);
  EXPECT_EQ(quant_mix_type(m, "blk.3.ffn_down_exps.weight", 2880, 24, false), DType::MXFP4);
  EXPECT_EQ(quant_mix_type(m, "blk.3.attn_q.weight", 2880, 24, false), DType::Q8_0);
  EXPECT_EQ(quant_mix_type(m, "output.weight", 2880, 24, false), DType::Q8_0);
  EXPECT_EQ(quant_mix_type(m, "token_embd.weight", 2880, 24, false), DType::Q8_0);
  EXPECT_EQ(quant_mix_type(m, "blk.0.attn_k.weight", 100, 24, false), DType::F16);
}

TEST(QuantMix, MoreBitsForTheOutputAndSomeLayersValuesAndDownProjections) {
  const QuantMix m = QuantMix::Q4_K_M;
  // 16 layers: use_more_bits is true for layers 0, 1 (< 2), 14, 15 (>= 14) and 4, 7, 10, 13.
  for (int64_t il = 0; il < 16; ++il) {
    const bool more = il < 2 || il >= 14 || (il - 2) % 3 == 2;
    const std::string p = "blk." + std::to_string(il) + ".";
    EXPECT_EQ(quant_mix_type(m, p + "attn_v.weight", 2048, 16, true),
              more ? DType::Q6_K : DType::Q4_K)
        << il;
    EXPECT_EQ(quant_mix_type(m, p + "ffn_down.weight", 8192, 16, true),
              more ? DType::Q6_K : DType::Q4_K)
        << il;
    EXPECT_EQ(quant_mix_type(m, p + "attn_q.weight", 2048, 16, true), DType::Q4_K) << il;
  }
  EXPECT_EQ(quant_mix_type(m, "token_embd.weight", 2048, 16, true), DType::Q6_K) << "tied";
  EXPECT_EQ(quant_mix_type(m, "token_embd.weight", 2048, 16, false), DType::Q4_K);
  EXPECT_EQ(quant_mix_type(m, "output.weight", 2048, 16, false), DType::Q6_K);
  EXPECT_EQ(quant_mix_type(QuantMix::Q5_K_M, "blk.2.attn_k.weight", 2048, 16, true), DType::Q5_K);
  // Rows of 896 values (Qwen2.5-0.5B) cannot hold 256-value blocks: llama.cpp's fallbacks.
  EXPECT_EQ(quant_mix_type(m, "blk.2.attn_k.weight", 896, 24, true), DType::Q5_0);
  EXPECT_EQ(quant_mix_type(m, "token_embd.weight", 896, 24, true), DType::Q8_0);
  EXPECT_EQ(quant_mix_type(QuantMix::Q5_K_M, "blk.2.attn_k.weight", 896, 24, true), DType::Q5_1);
}

TEST(QuantMix, AgreesWithLlamaCppsQ4KMFiles) {
  TRELLIS_REQUIRE_SHARED();
  for (const std::string arch : {"llama", "qwen2", "qwen3", "gemma3", "phi3"}) {
    const std::string path =
        testing::shared_dir() + "/reference-arch/" + arch + "-tiny-q4_k_m.gguf";
    Result<GgufFile> file = GgufFile::open(path);
    ASSERT_TRUE(file.ok()) << file.error().message;
    Result<int64_t> n_layer = file->get_int(arch + ".block_count");
    ASSERT_TRUE(n_layer.ok());
    const bool tied = file->find_tensor("output.weight") == nullptr;
    int matrices = 0;
    for (const GgufTensor& t : file->tensors()) {
      if (t.shape.size() != 2) continue;
      EXPECT_EQ(quant_mix_type(QuantMix::Q4_K_M, t.name, t.shape[0], *n_layer, tied), t.type)
          << arch << " " << t.name;
      ++matrices;
    }
    EXPECT_GE(matrices, 10) << arch;  // 2 layers of 4 or more, token_embd, output (phi3)
  }
}

// With an importance matrix, llama-quantize keeps the first eighth of Q4_0's ffn_down layers in
// Q4_1; without one, and for the other matrices and mixes, nothing changes.
TEST(QuantMix, Q4_0WithAnImportanceMatrixKeepsTheFirstDownProjectionsInQ4_1) {
  EXPECT_EQ(quant_mix_type(QuantMix::Q4_0, "blk.3.ffn_down.weight", 4096, 32, false, true),
            DType::Q4_1);
  EXPECT_EQ(quant_mix_type(QuantMix::Q4_0, "blk.4.ffn_down.weight", 4096, 32, false, true),
            DType::Q4_0);
  EXPECT_EQ(quant_mix_type(QuantMix::Q4_0, "blk.3.ffn_down.weight", 4096, 32, false, false),
            DType::Q4_0);
  EXPECT_EQ(quant_mix_type(QuantMix::Q4_0, "blk.3.ffn_up.weight", 4096, 32, false, true),
            DType::Q4_0);
  EXPECT_EQ(quant_mix_type(QuantMix::Q4_K_M, "blk.3.ffn_down.weight", 4096, 32, false, true),
            quant_mix_type(QuantMix::Q4_K_M, "blk.3.ffn_down.weight", 4096, 32, false, false));
  EXPECT_EQ(quant_mix_type(QuantMix::Q4_0, "blk.0.ffn_down.weight", 96, 32, false, true),
            DType::Q4_1);  // rows of 32: q4_1 fits them
}

}  // namespace
}  // namespace trellis
