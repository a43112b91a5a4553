// A decoder reranker's inputs share their common prefix (the prompt and the query) computed once,
// and each result is still bit for bit what the input gives alone; groups of many inputs reuse the
// KV blocks.
#include "embed/decoder_embedder.h"

#include <gtest/gtest.h>

#include "model/model_presets.h"
#include "model/synth_model.h"
#include "test_support.h"

namespace trellis {
namespace {

std::unique_ptr<Embedder> open_qwen3(Pooling pooling) {
  const std::string path =
      testing::temp_dir() + "/qwen3-" + std::string(pooling_name(pooling)) + ".gguf";
  Result<ModelPreset> preset = preset_for_arch(*find_model_preset("tiny"), "qwen3");
  EXPECT_TRUE(preset.ok());
  SynthOptions options{*preset, DType::Q8_0, 5, "", path, 2, false};
  options.pooling = pooling;
  EXPECT_TRUE(synthesize_model(options).ok());
  Result<std::unique_ptr<Embedder>> embedder = Embedder::open(path, {.n_threads = 2});
  EXPECT_TRUE(embedder.ok()) << embedder.error().message;
  return std::move(embedder).value();
}

TEST(DecoderEmbedder, RerankSharesTheQueryAndStaysExact) {
  std::unique_ptr<Embedder> embedder = open_qwen3(Pooling::RANK);
  auto& decoder = dynamic_cast<DecoderEmbedder&>(*embedder);
  const std::string query = "what is the capital of france?";
  const std::vector<std::string> docs = {"paris", "the cat sat on the mat", "hello world",
                                         "paris is the capital and largest city of france"};
  std::vector<std::vector<TokenId>> inputs;
  for (const std::string& d : docs) inputs.push_back(embedder->tokenize_pair(query, d));
  // The prompt up to the document: what every pair has in common.
  size_t common = inputs[0].size();
  for (const auto& input : inputs) {
    size_t k = 0;
    while (k < common && k < input.size() && input[k] == inputs[0][k]) ++k;
    common = k;
  }
  ASSERT_GT(common, 10u);

  Result<std::vector<std::vector<float>>> together = embedder->embed(inputs);
  ASSERT_TRUE(together.ok()) << together.error().message;
  EXPECT_EQ(decoder.n_shared_tokens(), static_cast<int64_t>(common));
  for (size_t i = 0; i < inputs.size(); ++i) {
    Result<std::vector<std::vector<float>>> alone = embedder->embed({&inputs[i], 1});
    ASSERT_TRUE(alone.ok());
    EXPECT_EQ((*alone)[0], (*together)[i]) << docs[i];
    ASSERT_EQ((*together)[i].size(), 2u);  // P(yes), P(no)
    EXPECT_NEAR((*together)[i][0] + (*together)[i][1], 1.0f, 1e-6f);
  }
  EXPECT_EQ(decoder.n_shared_tokens(), static_cast<int64_t>(common));  // alone: nothing shared
}

TEST(DecoderEmbedder, ManyInputsRunInGroupsReusingTheBlocks) {
  std::unique_ptr<Embedder> embedder = open_qwen3(Pooling::LAST);
  std::vector<std::vector<TokenId>> inputs;
  for (int i = 0; i < 150; ++i) {
    inputs.push_back(embedder->tokenize("passage number " + std::to_string(i) + " about rivers"));
  }
  Result<std::vector<std::vector<float>>> all = embedder->embed(inputs);
  ASSERT_TRUE(all.ok()) << all.error().message;
  ASSERT_EQ(all->size(), inputs.size());
  for (size_t i : {size_t{0}, size_t{63}, size_t{64}, size_t{149}}) {
    Result<std::vector<std::vector<float>>> alone = embedder->embed({&inputs[i], 1});
    ASSERT_TRUE(alone.ok());
    EXPECT_EQ((*alone)[0], (*all)[i]) << "input " << i;
  }
  EXPECT_NE((*all)[0], (*all)[1]);
}

TEST(DecoderEmbedder, BadInputsAndGenerativeFilesAreRefused) {
  std::unique_ptr<Embedder> embedder = open_qwen3(Pooling::LAST);
  const std::vector<std::vector<TokenId>> bad = {{1, 2, 3}, {}};
  Result<std::vector<std::vector<float>>> out = embedder->embed(bad);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().message, "input 1 is empty");
  std::vector<std::vector<TokenId>> too_long = {
      std::vector<TokenId>(static_cast<size_t>(embedder->n_ctx()) + 1, 5)};
  EXPECT_FALSE(embedder->embed(too_long).ok());

  const std::string generative = testing::temp_dir() + "/qwen3-generative.gguf";
  Result<ModelPreset> preset = preset_for_arch(*find_model_preset("tiny"), "qwen3");
  ASSERT_TRUE(synthesize_model({*preset, DType::Q8_0, 5, "", generative, 2, false}).ok());
  Result<std::unique_ptr<Embedder>> refused = Embedder::open(generative);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("pooling_type"), std::string::npos)
      << refused.error().message;
}

}  // namespace
}  // namespace trellis
