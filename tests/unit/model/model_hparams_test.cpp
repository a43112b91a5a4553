// Hyperparameters are read from GGUF metadata and validated.
#include "model/model_hparams.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <utility>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "test_support.h"

namespace trellis {
namespace {

// Writes a metadata-only GGUF with valid llama keys, after `edit` changes some of them.
Result<ModelHParams> read_with(const std::function<void(GgufWriter&)>& edit) {
  GgufWriter writer;
  writer.set("general.architecture", GgufValue{std::string("llama")});
  writer.set("llama.context_length", GgufValue{uint32_t{256}});
  writer.set("llama.embedding_length", GgufValue{uint32_t{64}});
  writer.set("llama.block_count", GgufValue{uint32_t{2}});
  writer.set("llama.feed_forward_length", GgufValue{uint32_t{128}});
  writer.set("llama.attention.head_count", GgufValue{uint32_t{8}});
  writer.set("llama.attention.head_count_kv", GgufValue{uint32_t{2}});
  writer.set("llama.vocab_size", GgufValue{uint32_t{300}});
  edit(writer);
  std::string path = testing::temp_dir() + "/hparams.gguf";
  if (!writer.begin(path).ok() || !writer.finish().ok()) return Error{"write failed"};
  Result<GgufFile> file = GgufFile::open(path);
  if (!file.ok()) return file.error();
  return read_model_hparams(*file);
}

TEST(ModelHParams, ReadsValuesAndDefaults) {
  Result<ModelHParams> hp = read_with([](GgufWriter&) {});
  ASSERT_TRUE(hp.ok()) << hp.error().message;
  EXPECT_EQ(hp->n_embd, 64);
  EXPECT_EQ(hp->n_head, 8);
  EXPECT_EQ(hp->n_head_kv, 2);
  EXPECT_EQ(hp->head_dim(), 8);
  EXPECT_EQ(hp->n_embd_kv(), 16);
  EXPECT_EQ(hp->n_rot, 8) << "defaults to the head size";
  EXPECT_EQ(hp->rope_freq_base, 10000.0);
  EXPECT_EQ(hp->rope_freq_scale, 1.0);
  EXPECT_EQ(hp->n_vocab, 300);

  Result<ModelHParams> scaled = read_with([](GgufWriter& w) {
    w.set("llama.rope.scale_linear", GgufValue{4.0f});
    w.set("llama.rope.freq_base", GgufValue{500000.0f});
  });
  ASSERT_TRUE(scaled.ok());
  EXPECT_EQ(scaled->rope_freq_scale, 0.25);
  EXPECT_EQ(scaled->rope_freq_base, 500000.0);
}

TEST(ModelHParams, RejectsInvalidModels) {
  auto expect_error = [](const std::function<void(GgufWriter&)>& edit,
                         const std::string& fragment) {
    Result<ModelHParams> hp = read_with(edit);
    ASSERT_FALSE(hp.ok()) << "expected: " << fragment;
    EXPECT_NE(hp.error().message.find(fragment), std::string::npos) << hp.error().message;
  };
  expect_error([](GgufWriter& w) { w.set("general.architecture", GgufValue{std::string("gptj")}); },
               "unsupported architecture 'gptj'");
  expect_error([](GgufWriter& w) { w.set("llama.embedding_length", GgufValue{uint32_t{60}}); },
               "not a multiple of head_count");
  expect_error(
      [](GgufWriter& w) { w.set("llama.attention.head_count_kv", GgufValue{uint32_t{3}}); },
      "head_count_kv");
  expect_error([](GgufWriter& w) { w.set("llama.block_count", GgufValue{int32_t{0}}); },
               "must be positive");
  expect_error([](GgufWriter& w) { w.set("llama.block_count", GgufValue{std::string("2")}); },
               "expected an integer");
  expect_error([](GgufWriter& w) { w.set("llama.rope.dimension_count", GgufValue{uint32_t{12}}); },
               "rope.dimension_count");
}

// Writes a metadata-only GGUF of architecture `arch` with valid keys, after `edit`.
Result<ModelHParams> read_arch(const std::string& arch,
                               const std::function<void(GgufWriter&)>& edit) {
  return read_with([&](GgufWriter& w) {
    w.set("general.architecture", GgufValue{arch});
    // The same sizes as read_with's llama keys, under this family's prefix.
    const std::pair<const char*, uint32_t> sizes[] = {
        {"context_length", 256},      {"embedding_length", 64},    {"block_count", 2},
        {"feed_forward_length", 128}, {"attention.head_count", 8}, {"attention.head_count_kv", 2},
        {"vocab_size", 300}};
    for (const auto& [key, value] : sizes) w.set(arch + "." + key, GgufValue{value});
    edit(w);
  });
}

TEST(ModelHParams, ReadsEachFamilysKeys) {
  Result<ModelHParams> qwen3 = read_arch("qwen3", [](GgufWriter& w) {
    w.set("qwen3.attention.key_length", GgufValue{uint32_t{16}});
    w.set("qwen3.attention.value_length", GgufValue{uint32_t{16}});
    w.set("qwen3.rope.freq_base", GgufValue{1e6f});
  });
  ASSERT_TRUE(qwen3.ok()) << qwen3.error().message;
  EXPECT_EQ(qwen3->arch, "qwen3");
  EXPECT_EQ(qwen3->head_dim(), 16) << "key_length, not n_embd / n_head = 8";
  EXPECT_EQ(qwen3->n_embd_q(), 128);
  EXPECT_EQ(qwen3->n_embd_kv(), 32);
  EXPECT_EQ(qwen3->n_rot, 16);
  EXPECT_EQ(qwen3->rope_freq_base, 1e6);
  EXPECT_EQ(qwen3->n_swa, 0) << "no sliding window outside the families that have one";

  Result<ModelHParams> gemma = read_arch("gemma3", [](GgufWriter& w) {
    w.set("gemma3.attention.sliding_window", GgufValue{uint32_t{16}});
    w.set("gemma3.rope.freq_base_swa", GgufValue{1e4f});
    w.set("gemma3.rope.scaling.type", GgufValue{std::string("linear")});
    w.set("gemma3.rope.scaling.factor", GgufValue{8.0f});
  });
  ASSERT_TRUE(gemma.ok()) << gemma.error().message;
  EXPECT_EQ(gemma->n_swa, 16);
  EXPECT_EQ(gemma->swa_pattern, 6) << "Gemma 3 files have no pattern key: five local, one global";
  EXPECT_EQ(gemma->rope_freq_base_swa, 1e4);
  EXPECT_EQ(gemma->rope_freq_scale, 0.125);
  for (int64_t il = 0; il < 12; ++il) EXPECT_EQ(gemma->is_local_layer(il), il % 6 != 5) << il;

  Result<ModelHParams> yarn = read_arch("qwen2", [](GgufWriter& w) {
    w.set("qwen2.rope.scaling.type", GgufValue{std::string("yarn")});
    w.set("qwen2.rope.scaling.factor", GgufValue{4.0f});
    w.set("qwen2.rope.scaling.original_context_length", GgufValue{uint32_t{32768}});
  });
  ASSERT_TRUE(yarn.ok()) << yarn.error().message;
  EXPECT_TRUE(yarn->rope_yarn);
  EXPECT_EQ(yarn->rope_freq_scale, 0.25);
  EXPECT_EQ(yarn->n_ctx_orig, 32768);
  Result<ModelHParams> dynamic = read_arch("qwen2", [](GgufWriter& w) {
    w.set("qwen2.rope.scaling.type", GgufValue{std::string("dynamic")});
  });
  ASSERT_FALSE(dynamic.ok());
  EXPECT_NE(dynamic.error().message.find("rope scaling 'dynamic' is not supported"),
            std::string::npos)
      << dynamic.error().message;
  Result<ModelHParams> lengths = read_arch("qwen3", [](GgufWriter& w) {
    w.set("qwen3.attention.key_length", GgufValue{uint32_t{16}});
    w.set("qwen3.attention.value_length", GgufValue{uint32_t{8}});
  });
  ASSERT_FALSE(lengths.ok());
  EXPECT_NE(lengths.error().message.find("key_length and value_length"), std::string::npos);
  Result<ModelHParams> unknown = read_arch("mamba", [](GgufWriter&) {});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find(
                "unsupported architecture 'mamba' (supported: llama, "
                "qwen2, qwen3, gemma3, phi3, qwen3moe, qwen2moe, olmoe, gpt-oss)"),
            std::string::npos)
      << unknown.error().message;
}

TEST(ModelHParams, RoutingKeysAFamilyDoesNotHaveAreRefusedByName) {
  auto experts = [](const std::string& arch, const std::function<void(GgufWriter&)>& more) {
    return read_arch(arch, [&](GgufWriter& w) {
      w.set(arch + ".expert_count", GgufValue{uint32_t{8}});
      w.set(arch + ".expert_used_count", GgufValue{uint32_t{2}});
      more(w);
    });
  };
  // The family's own values, written out, are fine.
  Result<ModelHParams> same = experts("qwen3moe", [](GgufWriter& w) {
    w.set("qwen3moe.expert_gating_func", GgufValue{uint32_t{1}});
    w.set("qwen3moe.expert_weights_norm", GgufValue{true});
    w.set("qwen3moe.expert_weights_scale", GgufValue{1.0f});
  });
  ASSERT_TRUE(same.ok()) << same.error().message;
  Result<ModelHParams> gpt_oss = experts("gpt-oss", [](GgufWriter& w) {
    w.set("gpt-oss.expert_gating_func", GgufValue{uint32_t{3}});
  });
  ASSERT_TRUE(gpt_oss.ok()) << gpt_oss.error().message;
  EXPECT_EQ(gpt_oss->expert_gating, ExpertGating::SOFTMAX_WEIGHT);
  const std::pair<std::function<void(GgufWriter&)>, std::string> refused[] = {
      {[](GgufWriter& w) { w.set("qwen3moe.expert_gating_func", GgufValue{uint32_t{2}}); },
       "qwen3moe.expert_gating_func = 2 is not supported"},
      {[](GgufWriter& w) { w.set("qwen3moe.expert_weights_scale", GgufValue{2.5f}); },
       "qwen3moe.expert_weights_scale"},
      {[](GgufWriter& w) { w.set("qwen3moe.leading_dense_block_count", GgufValue{uint32_t{1}}); },
       "qwen3moe.leading_dense_block_count = 1"},
      {[](GgufWriter& w) { w.set("qwen3moe.expert_shared_count", GgufValue{uint32_t{2}}); },
       "qwen3moe.expert_shared_count = 2"},
      {[](GgufWriter& w) { w.set("qwen3moe.expert_weights_norm", GgufValue{false}); },
       "qwen3moe.expert_weights_norm = false"},
  };
  for (const auto& [edit, fragment] : refused) {
    Result<ModelHParams> hp = experts("qwen3moe", edit);
    ASSERT_FALSE(hp.ok()) << fragment;
    EXPECT_NE(hp.error().message.find(fragment), std::string::npos) << hp.error().message;
  }
}

TEST(ModelHParams, ReadsLongRopeAndQueryScale) {
  Result<ModelHParams> plain = read_arch("phi3", [](GgufWriter&) {});
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_EQ(plain->rope_attn_factor, 1.0);
  EXPECT_EQ(plain->n_ctx_orig, 256) << "defaults to the training context";
  Result<ModelHParams> longrope = read_arch("phi3", [](GgufWriter& w) {
    w.set("phi3.rope.scaling.attn_factor", GgufValue{1.25f});
    w.set("phi3.rope.scaling.original_context_length", GgufValue{uint32_t{64}});
  });
  ASSERT_TRUE(longrope.ok()) << longrope.error().message;
  EXPECT_EQ(longrope->rope_attn_factor, 1.25);
  EXPECT_EQ(longrope->n_ctx_orig, 64);
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN()}) {
    Result<ModelHParams> refused = read_arch(
        "phi3", [&](GgufWriter& w) { w.set("phi3.rope.scaling.attn_factor", GgufValue{bad}); });
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.error().message.find("attn_factor"), std::string::npos);
  }
  // Gemma 3 27B (62 layers) scales queries by n_embd / n_head = 8 instead of its head size 16.
  auto gemma = [](uint32_t n_layer) {
    return read_arch("gemma3", [&](GgufWriter& w) {
      w.set("gemma3.block_count", GgufValue{n_layer});
      w.set("gemma3.attention.key_length", GgufValue{uint32_t{16}});
      w.set("gemma3.attention.value_length", GgufValue{uint32_t{16}});
    });
  };
  Result<ModelHParams> g27 = gemma(62), g4 = gemma(34);
  ASSERT_TRUE(g27.ok() && g4.ok());
  EXPECT_EQ(g27->query_scale_dim, 8);
  EXPECT_EQ(g4->query_scale_dim, 0) << "the head size";
}

TEST(ModelHParams, ReadsTheSharedModel) {
  TRELLIS_REQUIRE_SHARED();
  Result<GgufFile> file = GgufFile::open(testing::shared_dir() + "/models/stories260K.gguf");
  ASSERT_TRUE(file.ok());
  Result<ModelHParams> hp = read_model_hparams(*file);
  ASSERT_TRUE(hp.ok()) << hp.error().message;
  EXPECT_EQ(hp->n_vocab, 512) << "from the token list: the file has no llama.vocab_size";
  EXPECT_EQ(hp->n_layer, 5);
  EXPECT_EQ(hp->n_ff, 172);
  EXPECT_EQ(hp->head_dim(), 8);
  EXPECT_EQ(hp->n_rot, 8);
}

}  // namespace
}  // namespace trellis
