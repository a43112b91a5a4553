// Every family `model synth` writes (llama, llama3, qwen2, qwen3, gemma3, phi3) loads with
// Model::load, holds exactly the tensors and shapes of shared/reference-arch/README.md's lists,
// and runs through the engine to finite logits with the same greedy tokens whether the prefix
// cache serves the prompt or not. The real-model presets carry the published configs' values
// (checked on the presets and tensor lists; their files are hundreds of MB and never written).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>

#include "engine/engine.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "model/model_presets.h"
#include "model/synth_layout.h"
#include "model/synth_model.h"
#include "test_support.h"

namespace trellis {
namespace {

using Shapes = std::map<std::string, std::vector<int64_t>>;

const std::vector<std::string> kArchs = {"llama", "llama3", "qwen2", "qwen3", "gemma3", "phi3"};

ModelPreset tiny_as(const std::string& arch) {
  Result<ModelPreset> preset = preset_for_arch(*find_model_preset("tiny"), arch);
  EXPECT_TRUE(preset.ok()) << preset.error().message;
  return *preset;
}

std::string synth_tiny(const std::string& arch) {
  std::string path = testing::temp_dir() + "/synth-" + arch + ".gguf";
  SynthOptions options{tiny_as(arch), DType::Q8_0, 11, "", path, 2, false};
  Status status = synthesize_model(options);
  EXPECT_TRUE(status.ok()) << status.error().message;
  return path;
}

// The tensors each family needs, written out from the reference README's tables (not from
// synth_layout.cpp): E = n_embd, Q = n_head·head, K = n_head_kv·head, F = n_ff, V = vocab.
Shapes expected_tensors(const std::string& arch, const ModelHParams& hp) {
  const int64_t E = hp.n_embd, Q = hp.n_embd_q(), K = hp.n_embd_kv(), F = hp.n_ff;
  const int64_t V = hp.n_vocab, D = hp.head_dim();
  Shapes s = {{"token_embd.weight", {E, V}}, {"output_norm.weight", {E}}};
  if (arch == "llama" || arch == "phi3") s["output.weight"] = {E, V};
  if (arch == "llama3") s["rope_freqs.weight"] = {hp.n_rot / 2};
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    s[p + "attn_norm.weight"] = {E};
    s[p + "attn_output.weight"] = {Q, E};
    s[p + "ffn_norm.weight"] = {E};
    s[p + "ffn_down.weight"] = {F, E};
    if (arch == "phi3") {
      s[p + "attn_qkv.weight"] = {E, Q + 2 * K};
      s[p + "ffn_up.weight"] = {E, 2 * F};
      continue;
    }
    s[p + "attn_q.weight"] = {E, Q};
    s[p + "attn_k.weight"] = {E, K};
    s[p + "attn_v.weight"] = {E, K};
    s[p + "ffn_gate.weight"] = {E, F};
    s[p + "ffn_up.weight"] = {E, F};
    if (arch == "qwen2") {
      s[p + "attn_q.bias"] = {Q};
      s[p + "attn_k.bias"] = {K};
      s[p + "attn_v.bias"] = {K};
    }
    if (arch == "qwen3" || arch == "gemma3") {
      s[p + "attn_q_norm.weight"] = {D};
      s[p + "attn_k_norm.weight"] = {D};
    }
    if (arch == "gemma3") {
      s[p + "post_attention_norm.weight"] = {E};
      s[p + "post_ffw_norm.weight"] = {E};
    }
  }
  return s;
}

TEST(SynthArch, EachFamilyHasExactlyItsTensorsAndKeys) {
  for (const std::string& arch : kArchs) {
    SCOPED_TRACE(arch);
    Result<GgufFile> file = GgufFile::open(synth_tiny(arch));
    ASSERT_TRUE(file.ok()) << file.error().message;
    Result<ModelHParams> hp = read_model_hparams(*file);
    ASSERT_TRUE(hp.ok()) << hp.error().message;
    EXPECT_EQ(hp->arch, arch == "llama3" ? "llama" : arch);
    const bool wide_heads = arch == "qwen3" || arch == "gemma3";
    EXPECT_EQ(hp->head_dim(), wide_heads ? 64 : 32) << "tiny: width 128, 4 heads";
    EXPECT_EQ(file->has(hp->arch + ".attention.key_length"), wide_heads);
    Shapes got;
    for (const GgufTensor& t : file->tensors()) got[t.name] = t.shape;
    EXPECT_EQ(got, expected_tensors(arch, *hp));
    for (const GgufTensor& t : file->tensors()) {
      if (t.shape.size() == 1) {
        EXPECT_EQ(t.type, DType::F32) << t.name;
      }
    }
    Result<std::unique_ptr<Model>> model = Model::load(*file);
    ASSERT_TRUE(model.ok()) << model.error().message;
  }
}

TEST(SynthArch, FamilySpecificValues) {
  // gemma3: window and pattern keys, both kinds of layer in a 4-layer model.
  Result<GgufFile> gemma = GgufFile::open(synth_tiny("gemma3"));
  ASSERT_TRUE(gemma.ok());
  Result<ModelHParams> hp = read_model_hparams(*gemma);
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->n_swa, 32) << "min(512, 512 / 16)";
  EXPECT_EQ(hp->swa_pattern, 2);
  EXPECT_TRUE(hp->is_local_layer(0));
  EXPECT_FALSE(hp->is_local_layer(1));
  EXPECT_DOUBLE_EQ(hp->rope_freq_base, 1e6);
  EXPECT_DOUBLE_EQ(hp->rope_freq_base_swa, 1e4);
  EXPECT_FLOAT_EQ(static_cast<float>(hp->rms_norm_eps), 1e-6f);
  // llama3: rope base 500000 and the factors of Llama 3 scaling in rope_freqs.
  Result<GgufFile> llama3 = GgufFile::open(synth_tiny("llama3"));
  ASSERT_TRUE(llama3.ok());
  hp = read_model_hparams(*llama3);
  ASSERT_TRUE(hp.ok());
  EXPECT_DOUBLE_EQ(hp->rope_freq_base, 500000.0);
  const GgufTensor* freqs = llama3->find_tensor("rope_freqs.weight");
  ASSERT_NE(freqs, nullptr);
  const auto* values = reinterpret_cast<const float*>(freqs->data);
  const std::vector<float> want = llama3_rope_factors(Llama3RopeScaling{}, 32, 500000.0);
  EXPECT_EQ(std::vector<float>(values, values + freqs->n_elements), want);
  // qwen2: small biases, not all zero.
  Result<GgufFile> qwen2 = GgufFile::open(synth_tiny("qwen2"));
  ASSERT_TRUE(qwen2.ok());
  const GgufTensor* bias = qwen2->find_tensor("blk.1.attn_k.bias");
  ASSERT_NE(bias, nullptr);
  const auto* b = reinterpret_cast<const float*>(bias->data);
  double sum_sq = 0;
  for (int64_t i = 0; i < bias->n_elements; ++i) sum_sq += static_cast<double>(b[i]) * b[i];
  EXPECT_NEAR(std::sqrt(sum_sq / static_cast<double>(bias->n_elements)), 0.02, 0.008);
}

TEST(SynthArch, Llama3RopeFactorsMatchTheConverter) {
  // Llama-3.2-1B: head 64, base 500000, factor 32, low 1, high 4, original context 8192. The
  // reference README lists 15 pairs at 1, pairs 15-17 smoothed, 14 pairs at 32.
  const std::vector<float> f = llama3_rope_factors(Llama3RopeScaling{}, 64, 500000.0);
  ASSERT_EQ(f.size(), 32u);
  for (size_t i = 0; i < 15; ++i) EXPECT_EQ(f[i], 1.0f) << i;
  EXPECT_NEAR(f[15], 1.6513, 1e-3);
  EXPECT_NEAR(f[16], 3.2923, 1e-3);
  EXPECT_NEAR(f[17], 9.6667, 1e-3);
  for (size_t i = 18; i < 32; ++i) EXPECT_EQ(f[i], 32.0f) << i;
}

// Runs one greedy request; its logits are returned with the tokens.
RequestOutput run_greedy(Engine& engine, const std::vector<TokenId>& prompt) {
  EngineRequest request;
  request.prompt = prompt;
  request.max_tokens = 6;
  request.sampling.temperature = 0;
  request.ignore_eos = true;
  request.return_logits = true;
  Result<RequestOutput> out = engine.run(std::move(request));
  EXPECT_TRUE(out.ok()) << out.error().message;
  return out.ok() ? std::move(out).value() : RequestOutput{};
}

TEST(SynthArch, EachFamilyRunsWithTheSameTokensCacheOnAndOff) {
  // 45 tokens: longer than gemma3's tiny window (32), and more than one block of 16.
  std::vector<TokenId> prompt(45);
  std::iota(prompt.begin(), prompt.end(), 3);
  for (const std::string& arch : kArchs) {
    SCOPED_TRACE(arch);
    const std::string path = synth_tiny(arch);
    std::vector<std::vector<TokenId>> outputs;
    for (bool cache : {false, true}) {
      EngineConfig config;
      config.n_threads = 2;
      config.block_size = 16;
      config.n_ctx = 128;
      config.prefix_cache.enabled = cache;
      Result<std::unique_ptr<Engine>> engine = Engine::create(path, config);
      ASSERT_TRUE(engine.ok()) << engine.error().message;
      // With the cache on the second run is served from the first one's blocks.
      for (int repeat = 0; repeat < (cache ? 2 : 1); ++repeat) {
        const RequestOutput out = run_greedy(**engine, prompt);
        ASSERT_EQ(out.tokens.size(), 6u) << out.error;
        ASSERT_EQ(out.logits.size(), 6u);
        for (const std::vector<float>& row : out.logits) {
          ASSERT_EQ(row.size(), 2048u);
          for (float v : row) ASSERT_TRUE(std::isfinite(v));
        }
        if (repeat == 1) {
          EXPECT_GT(out.stats.n_cached_tokens, 0);
        }
        outputs.push_back(out.tokens);
      }
    }
    EXPECT_EQ(outputs[1], outputs[0]) << "cache on, cold";
    EXPECT_EQ(outputs[2], outputs[0]) << "cache on, served from the cache";
  }
}

TEST(SynthArch, RecastingKeepsOwnFamilyAndRejectsUnknownNames) {
  const ModelPreset tiny = *find_model_preset("tiny");
  Result<ModelPreset> same = preset_for_arch(tiny, "llama");
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->description, tiny.description);
  EXPECT_FALSE(same->tied_output);
  Result<ModelPreset> llama32 = preset_for_arch(*find_model_preset("llama-3.2-1b"), "llama3");
  ASSERT_TRUE(llama32.ok());
  EXPECT_EQ(llama32->name, "llama-3.2-1b");
  EXPECT_FALSE(preset_for_arch(tiny, "gpt2").ok());
  EXPECT_FALSE(preset_for_arch(tiny, "").ok());
}

struct Published {
  std::string preset;
  std::string arch;
  int64_t vocab, ctx, embd, layers, heads, kv_heads, head_dim, ff;
  double rope_base, eps;
  bool tied;
};

TEST(SynthArch, RealPresetsCarryThePublishedConfigs) {
  // From the models' config.json (vocab_size, max_position_embeddings, hidden_size,
  // num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim, intermediate_size,
  // rope_theta, rms_norm_eps, tie_word_embeddings).
  const std::vector<Published> published = {
      {"llama-3.2-1b", "llama", 128256, 131072, 2048, 16, 32, 8, 64, 8192, 500000.0, 1e-5, true},
      {"qwen2.5-0.5b", "qwen2", 151936, 32768, 896, 24, 14, 2, 64, 4864, 1e6, 1e-6, true},
      {"qwen3-0.6b", "qwen3", 151936, 40960, 1024, 28, 16, 8, 128, 3072, 1e6, 1e-6, true},
      {"gemma-3-1b", "gemma3", 262144, 32768, 1152, 26, 4, 1, 256, 6912, 1e6, 1e-6, true},
      {"phi-3.5-mini", "phi3", 32064, 131072, 3072, 32, 32, 32, 96, 8192, 10000.0, 1e-5, false},
  };
  for (const Published& want : published) {
    SCOPED_TRACE(want.preset);
    std::optional<ModelPreset> preset = find_model_preset(want.preset);
    ASSERT_TRUE(preset.has_value());
    const ModelHParams& hp = preset->hparams;
    EXPECT_EQ(hp.arch, want.arch);
    EXPECT_EQ(hp.n_vocab, want.vocab);
    EXPECT_EQ(hp.n_ctx_train, want.ctx);
    EXPECT_EQ(hp.n_embd, want.embd);
    EXPECT_EQ(hp.n_layer, want.layers);
    EXPECT_EQ(hp.n_head, want.heads);
    EXPECT_EQ(hp.n_head_kv, want.kv_heads);
    EXPECT_EQ(hp.head_dim(), want.head_dim);
    EXPECT_EQ(hp.n_rot, want.head_dim);
    EXPECT_EQ(hp.n_ff, want.ff);
    EXPECT_DOUBLE_EQ(hp.rope_freq_base, want.rope_base);
    EXPECT_DOUBLE_EQ(hp.rms_norm_eps, want.eps);
    EXPECT_DOUBLE_EQ(hp.rope_freq_scale, 1.0);
    EXPECT_EQ(preset->tied_output, want.tied);
    // The tensor list (not written) is the family's, at full size.
    Shapes got;
    for (const SynthTensor& t : synth_tensor_list(*preset, DType::Q4_0)) got[t.name] = t.shape;
    Shapes want_tensors = expected_tensors(preset->llama3_rope ? "llama3" : want.arch, hp);
    if (preset->longrope) {  // Phi-3.5's LongRoPE factors, one per rotated pair
      want_tensors["rope_factors_long.weight"] = {hp.n_rot / 2};
      want_tensors["rope_factors_short.weight"] = {hp.n_rot / 2};
    }
    EXPECT_EQ(got, want_tensors);
  }
  // Phi-3.5-mini: LongRoPE from its original 4k context to 128k, with the converter's attention
  // factor sqrt(1 + ln(32) / ln(4096)).
  const ModelPreset phi = *find_model_preset("phi-3.5-mini");
  ASSERT_TRUE(phi.longrope.has_value());
  EXPECT_EQ(phi.hparams.n_ctx_orig, 4096);
  EXPECT_NEAR(phi.hparams.rope_attn_factor, 1.190238, 1e-6);
  const std::vector<float> long_factors = longrope_factors(*phi.longrope, 96, 131072, true);
  ASSERT_EQ(long_factors.size(), 48u);
  EXPECT_FLOAT_EQ(long_factors.front(), 1.0f);
  EXPECT_FLOAT_EQ(long_factors.back(), 32.0f);
  const ModelHParams gemma = find_model_preset("gemma-3-1b")->hparams;
  EXPECT_EQ(gemma.n_swa, 512);
  EXPECT_EQ(gemma.swa_pattern, 6);
  EXPECT_DOUBLE_EQ(gemma.rope_freq_base_swa, 10000.0);
  const ModelPreset llama = *find_model_preset("llama-3.2-1b");
  ASSERT_TRUE(llama.llama3_rope.has_value());
  EXPECT_DOUBLE_EQ(llama.llama3_rope->factor, 32.0);
  EXPECT_DOUBLE_EQ(llama.llama3_rope->low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(llama.llama3_rope->high_freq_factor, 4.0);
  EXPECT_EQ(llama.llama3_rope->original_context, 8192);
  // The llama presets that were there before are unchanged: untied, no rope_freqs.
  for (const char* name : {"tiny", "small", "tinyllama-1.1b"}) {
    const ModelPreset p = *find_model_preset(name);
    EXPECT_EQ(p.hparams.arch, "llama") << name;
    EXPECT_FALSE(p.tied_output) << name;
    EXPECT_FALSE(p.llama3_rope.has_value()) << name;
  }
}

}  // namespace
}  // namespace trellis
