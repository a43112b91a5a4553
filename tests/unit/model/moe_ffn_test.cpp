// The mixture-of-experts sublayer: routing (top-k, ties, renormalization) and Mixtral's two file
// layouts, stacked experts and the older one tensor per expert, giving the same model.
#include "model/moe_ffn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "model/model_presets.h"
#include "model/synth_model.h"
#include "quant/quant.h"
#include "test_support.h"

namespace trellis {
namespace {

ModelHParams experts_of(int64_t n_expert, int64_t k, bool renormalize) {
  ModelHParams hp;
  hp.n_expert = n_expert;
  hp.n_expert_used = k;
  hp.expert_weights_norm = renormalize;
  return hp;
}

struct Routed {
  std::vector<int32_t> experts;
  std::vector<float> weights;
  std::vector<float> probs;
};

Routed route(const std::vector<float>& scores, const ModelHParams& hp) {
  Routed r{std::vector<int32_t>(hp.n_expert_used), std::vector<float>(hp.n_expert_used),
           std::vector<float>(scores.size())};
  route_token(scores.data(), hp, r.probs.data(), r.experts.data(), r.weights.data());
  return r;
}

TEST(MoeRouting, ChoosesTheBestExpertsBestFirst) {
  const Routed r = route({0.1f, 2.0f, -1.0f, 1.5f, 0.7f, 3.0f}, experts_of(6, 3, false));
  EXPECT_EQ(r.experts, (std::vector<int32_t>{5, 1, 3}));
  double sum = 0;
  for (float p : r.probs) sum += p;
  EXPECT_NEAR(sum, 1.0, 1e-6);
  for (int j = 0; j < 3; ++j) EXPECT_EQ(r.weights[j], r.probs[r.experts[j]]);  // not renormalized
}

TEST(MoeRouting, TiesGoToTheLowerIndex) {
  // Ties at the top, and a tie straddling the cut: the lower index ranks first and is kept.
  const Routed r =
      route({1.0f, 2.0f, 2.0f, 0.5f, 1.0f, 1.0f, 2.0f, -3.0f}, experts_of(8, 4, false));
  EXPECT_EQ(r.experts, (std::vector<int32_t>{1, 2, 6, 0}));
  std::vector<float> all_equal(20, 0.25f);
  const Routed flat = route(all_equal, experts_of(20, 5, false));
  EXPECT_EQ(flat.experts, (std::vector<int32_t>{0, 1, 2, 3, 4}));
}

TEST(MoeRouting, RenormalizedWeightsSumToOne) {
  const Routed r = route({0.3f, -0.2f, 1.1f, 0.9f}, experts_of(4, 2, true));
  EXPECT_EQ(r.experts, (std::vector<int32_t>{2, 3}));
  EXPECT_NEAR(r.weights[0] + r.weights[1], 1.0f, 1e-6f);
  // Top-2 of a softmax, renormalized: the softmax of the two scores.
  EXPECT_NEAR(r.weights[0], 1.0 / (1.0 + std::exp(0.9 - 1.1)), 1e-6);
  const Routed one = route({0.3f, -0.2f, 1.1f, 0.9f}, experts_of(4, 1, true));
  EXPECT_EQ(one.experts, (std::vector<int32_t>{2}));
  EXPECT_FLOAT_EQ(one.weights[0], 1.0f);
}

TEST(MoeRouting, SoftmaxWeightGatingChoosesByScoreAndWeighsBySoftmaxOfTheChosen) {
  // gpt-oss: the k best raw scores, then a softmax over those k only.
  ModelHParams hp = experts_of(6, 2, false);
  hp.expert_gating = ExpertGating::SOFTMAX_WEIGHT;
  const Routed r = route({0.1f, 2.0f, -1.0f, 1.5f, 0.7f, 3.0f}, hp);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{5, 1}));
  EXPECT_NEAR(r.weights[0], 1.0 / (1.0 + std::exp(2.0 - 3.0)), 1e-6);
  EXPECT_NEAR(r.weights[0] + r.weights[1], 1.0, 1e-6);
  // With SOFTMAX over all six and no renormalization the same experts weigh much less.
  const Routed all = route({0.1f, 2.0f, -1.0f, 1.5f, 0.7f, 3.0f}, experts_of(6, 2, false));
  EXPECT_LT(all.weights[0], r.weights[0] - 0.05f);
}

// `stacked` rewritten as Mixtral's older files were: blk.N.ffn_gate.E.weight etc., one tensor per
// expert, instead of each stacked ffn_*_exps.weight.
void write_per_expert(const GgufFile& stacked, const std::string& path) {
  GgufWriter writer;
  for (const GgufKv& kv : stacked.metadata()) writer.set(kv.key, kv.value);
  struct Piece {
    std::string name;
    const GgufTensor* tensor;
    int64_t expert;  // -1: the whole tensor
  };
  std::vector<Piece> pieces;
  for (const GgufTensor& t : stacked.tensors()) {
    const size_t at = t.name.find("_exps.weight");
    if (at == std::string::npos) {
      pieces.push_back({t.name, &t, -1});
      continue;
    }
    for (int64_t e = 0; e < t.shape[2]; ++e)
      pieces.push_back({t.name.substr(0, at) + "." + std::to_string(e) + ".weight", &t, e});
  }
  for (const Piece& p : pieces) {
    std::vector<int64_t> shape = p.tensor->shape;
    if (p.expert >= 0) shape.resize(2);
    ASSERT_TRUE(writer.add_tensor(p.name, p.tensor->type, shape).ok());
  }
  ASSERT_TRUE(writer.begin(path).ok());
  for (const Piece& p : pieces) {
    std::span<const uint8_t> bytes = p.tensor->bytes();
    if (p.expert >= 0) {
      const size_t per_expert = bytes.size() / static_cast<size_t>(p.tensor->shape[2]);
      bytes = bytes.subspan(static_cast<size_t>(p.expert) * per_expert, per_expert);
    }
    ASSERT_TRUE(writer.write_tensor_data(bytes).ok());
  }
  ASSERT_TRUE(writer.finish().ok());
}

std::vector<std::vector<float>> prompt_logits(const std::string& path,
                                              const std::vector<TokenId>& prompt) {
  EngineConfig config;
  config.n_threads = 2;
  config.n_ctx = 128;
  config.kv_types = KvTypes::both(KvType::F32);
  Result<std::unique_ptr<Engine>> engine = Engine::create(path, config);
  EXPECT_TRUE(engine.ok()) << engine.error().message;
  if (!engine.ok()) return {};
  EngineRequest request;
  request.prompt = prompt;
  request.max_tokens = 0;
  request.return_prompt_logits = true;
  Result<RequestOutput> out = (*engine)->run(std::move(request));
  EXPECT_TRUE(out.ok()) << out.error().message;
  return out.ok() ? out->prompt_logits : std::vector<std::vector<float>>{};
}

TEST(MoeLayouts, MixtralsOneTensorPerExpertFilesGiveTheSameLogits) {
  Result<ModelPreset> preset = preset_for_arch(*find_model_preset("tiny"), "mixtral");
  ASSERT_TRUE(preset.ok()) << preset.error().message;
  const std::string stacked_path = testing::temp_dir() + "/mixtral-stacked.gguf";
  SynthOptions options{*preset, DType::Q8_0, 11, "", stacked_path, 2, false};
  ASSERT_TRUE(synthesize_model(options).ok());
  Result<GgufFile> stacked = GgufFile::open(stacked_path);
  ASSERT_TRUE(stacked.ok()) << stacked.error().message;
  const std::string split_path = testing::temp_dir() + "/mixtral-per-expert.gguf";
  write_per_expert(*stacked, split_path);
  Result<GgufFile> split = GgufFile::open(split_path);
  ASSERT_TRUE(split.ok()) << split.error().message;
  ASSERT_EQ(split->find_tensor("blk.0.ffn_up_exps.weight"), nullptr);
  ASSERT_NE(split->find_tensor("blk.0.ffn_up.7.weight"), nullptr);

  std::vector<TokenId> prompt(24);
  std::iota(prompt.begin(), prompt.end(), 40);
  const std::vector<std::vector<float>> expected = prompt_logits(stacked_path, prompt);
  ASSERT_EQ(expected.size(), prompt.size());
  EXPECT_EQ(prompt_logits(split_path, prompt), expected);
}

TEST(MoeLayouts, AFileMissingAnExpertIsRefusedByName) {
  Result<ModelPreset> preset = preset_for_arch(*find_model_preset("tiny"), "mixtral");
  ASSERT_TRUE(preset.ok());
  const std::string stacked_path = testing::temp_dir() + "/mixtral-stacked-2.gguf";
  ASSERT_TRUE(synthesize_model({*preset, DType::Q8_0, 11, "", stacked_path, 2, false}).ok());
  Result<GgufFile> stacked = GgufFile::open(stacked_path);
  ASSERT_TRUE(stacked.ok());
  const std::string split_path = testing::temp_dir() + "/mixtral-per-expert-2.gguf";
  write_per_expert(*stacked, split_path);
  // Drop expert 5's down matrix of layer 1.
  Result<GgufFile> split = GgufFile::open(split_path);
  ASSERT_TRUE(split.ok());
  const std::string dropped_path = testing::temp_dir() + "/mixtral-missing-expert.gguf";
  GgufWriter writer;
  for (const GgufKv& kv : split->metadata()) writer.set(kv.key, kv.value);
  const std::string drop = "blk.1.ffn_down.5.weight";
  for (const GgufTensor& t : split->tensors()) {
    if (t.name != drop) {
      ASSERT_TRUE(writer.add_tensor(t.name, t.type, t.shape).ok());
    }
  }
  ASSERT_TRUE(writer.begin(dropped_path).ok());
  for (const GgufTensor& t : split->tensors()) {
    if (t.name != drop) {
      ASSERT_TRUE(writer.write_tensor_data(t.bytes()).ok());
    }
  }
  ASSERT_TRUE(writer.finish().ok());
  Result<GgufFile> dropped = GgufFile::open(dropped_path);
  ASSERT_TRUE(dropped.ok());
  Result<std::unique_ptr<Model>> model = Model::load(*dropped);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find("missing tensor '" + drop + "'"), std::string::npos)
      << model.error().message;
}

}  // namespace
}  // namespace trellis
