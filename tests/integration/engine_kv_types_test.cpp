// Quantized KV through the engine: at the same --kv-mem the pool holds ~1.9x (q8_0) and ~3.6x
// (q4_0) the blocks of f16; the logits stay close to f16's, q8_0 closer than q4_0; a model whose
// heads the quantized blocks do not tile is refused by name; and nothing leaks. (Cache on == off
// and batch invariance per KV type: prefix_cache_exactness_test.cpp, batch_invariance_test.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/model_presets.h"
#include "model/synth_model.h"
#include "test_support.h"

namespace trellis {
namespace {

using Tokens = std::vector<TokenId>;

EngineConfig config_for(KvTypes types) {
  EngineConfig config;
  config.n_threads = 2;
  config.block_size = 16;
  config.n_ctx = 256;
  config.kv_types = types;
  return config;
}

std::unique_ptr<Engine> make_engine(const EngineConfig& config) {
  Result<std::unique_ptr<Engine>> engine = Engine::create(testing::tiny_engine_model(), config);
  EXPECT_TRUE(engine.ok()) << engine.error().message;
  return engine.ok() ? std::move(engine).value() : nullptr;
}

TEST(EngineKvTypes, TheSameMemoryHoldsMoreBlocks) {
  int32_t blocks[3] = {0, 0, 0};
  const KvType types[3] = {KvType::F16, KvType::Q8_0, KvType::Q4_0};
  for (int i = 0; i < 3; ++i) {
    EngineConfig config = config_for(KvTypes::both(types[i]));
    config.kv_bytes = 8 << 20;
    std::unique_ptr<Engine> engine = make_engine(config);
    ASSERT_NE(engine, nullptr);
    blocks[i] = engine->stats().n_blocks_total;
  }
  EXPECT_GE(blocks[1], blocks[0] * 18 / 10) << blocks[0] << " f16 blocks, " << blocks[1] << " q8_0";
  EXPECT_GE(blocks[2], blocks[0] * 32 / 10) << blocks[0] << " f16 blocks, " << blocks[2] << " q4_0";
}

// The largest |difference| between two logit rows, relative to the largest |logit| of `want`.
double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(got[i] - want[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
  }
  return diff / scale;
}

TEST(EngineKvTypes, LogitsStayCloseToF16AndQ8_0CloserThanQ4_0) {
  std::mt19937 rng(21);
  Tokens prompt;
  for (int i = 0; i < 100; ++i) prompt.push_back(std::uniform_int_distribution<int>(3, 2000)(rng));
  std::vector<float> first_logits[3];
  const KvTypes types[3] = {KvTypes{}, KvTypes::both(KvType::Q8_0), KvTypes::both(KvType::Q4_0)};
  for (int i = 0; i < 3; ++i) {
    std::unique_ptr<Engine> engine = make_engine(config_for(types[i]));
    ASSERT_NE(engine, nullptr);
    Result<RequestOutput> out = engine->run(testing::greedy_request(prompt, 1, true));
    ASSERT_TRUE(out.ok()) << out.error().message;
    ASSERT_EQ(out->logits.size(), 1u);
    first_logits[i] = out->logits[0];
    testing::expect_no_leak(*engine);
  }
  const double q8 = relative_error(first_logits[1], first_logits[0]);
  const double q4 = relative_error(first_logits[2], first_logits[0]);
  EXPECT_GT(q8, 0.0) << "q8_0 KV gave f16's logits bit for bit: was the type applied?";
  EXPECT_LT(q8, 0.02);
  EXPECT_LT(q4, 0.1);
  EXPECT_LT(q8, q4);
}

TEST(EngineKvTypes, HeadsThatQuantizedBlocksDoNotTileAreRefusedByName) {
  // The tiny preset with 48-wide heads (width 96, 2 heads).
  ModelPreset preset = *find_model_preset("tiny");
  preset.hparams.n_embd = 96;
  preset.hparams.n_head = 2;
  preset.hparams.n_head_kv = 1;
  preset.hparams.n_rot = 48;
  const std::string path = testing::temp_dir() + "/head48.gguf";
  ASSERT_TRUE(synthesize_model(SynthOptions{preset, DType::F32, 3, "", path, 2, false}).ok());
  EngineConfig config = config_for(KvTypes{KvType::F16, KvType::Q8_0});
  Result<std::unique_ptr<Engine>> engine = Engine::create(path, config);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.error().message.find("q8_0"), std::string::npos) << engine.error().message;
  EXPECT_NE(engine.error().message.find("48"), std::string::npos) << engine.error().message;
  config.kv_types = KvTypes{};
  EXPECT_TRUE(Engine::create(path, config).ok());
}

}  // namespace
}  // namespace trellis
