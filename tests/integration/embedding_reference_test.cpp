// Embedding models and rerankers against llama.cpp: the embeddings and rerank scores of tiny
// synthesized bert and nomic-bert encoders and qwen3 decoders with a pooling
// (tests/data/embeddings, scripts/gen_embedding_refs.py), each input run alone and all of them in
// one batch (where a decoder's inputs share their common prefix's KV).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "embed/embedder.h"
#include "model/encoder_synth.h"
#include "model/model_presets.h"
#include "model/synth_model.h"
#include "test_support.h"

namespace trellis {
namespace {

struct Reference {
  std::string query;                        // rerankers
  std::vector<std::string> inputs;          // texts, or documents
  std::vector<int64_t> n_tokens;            // embeddings: the prompt_tokens llama.cpp counted
  std::vector<std::vector<float>> outputs;  // normalized embeddings, or one score each
};

std::string data_dir() {
  return std::string(TRELLIS_SOURCE_DIR) + "/tests/data/embeddings/";
}

Reference read_reference(const std::string& name) {
  std::ifstream in(data_dir() + name + ".ref.txt");
  EXPECT_TRUE(in.good()) << name;
  Reference ref;
  std::string line;
  while (std::getline(in, line)) {
    auto value = [&](const std::string& key) { return line.substr(key.size()); };
    if (line.starts_with("query: ")) ref.query = value("query: ");
    if (line.starts_with("text: ")) ref.inputs.push_back(value("text: "));
    if (line.starts_with("document: ")) ref.inputs.push_back(value("document: "));
    if (line.starts_with("prompt_tokens: "))
      ref.n_tokens.push_back(std::stoll(value("prompt_tokens: ")));
    if (line.starts_with("embedding: ") || line.starts_with("score: ")) {
      std::istringstream numbers(line.substr(line.find(' ') + 1));
      std::vector<float> v;
      for (float x; numbers >> x;) v.push_back(x);
      ref.outputs.push_back(std::move(v));
    }
  }
  return ref;
}

// Synthesizes the model as gen_embedding_refs.py does: an encoder, or the tiny preset recast to
// a decoder family with a pooling.
std::unique_ptr<Embedder> open_model(const std::string& family, Pooling pooling, DType type) {
  const std::string path = testing::temp_dir() + "/" + family + "-" +
                           std::string(pooling_name(pooling)) + "-" +
                           std::string(dtype_name(type)) + ".gguf";
  Status written;
  if (const EncoderFamily* encoder = find_encoder_family(family)) {
    EncoderSynthOptions options;
    options.preset = find_encoder_preset("tiny");
    options.family = encoder;
    options.pooling = pooling;
    options.type = type;
    options.seed = 7;
    options.output_path = path;
    options.show_progress = false;
    written = synthesize_encoder(options);
  } else {
    Result<ModelPreset> preset = preset_for_arch(*find_model_preset("tiny"), family);
    EXPECT_TRUE(preset.ok());
    SynthOptions options{*preset, type, 7, "", path, 2, false};
    options.pooling = pooling;
    written = synthesize_model(options);
  }
  EXPECT_TRUE(written.ok()) << written.error().message;
  Result<std::unique_ptr<Embedder>> embedder = Embedder::open(path, {.n_threads = 2});
  EXPECT_TRUE(embedder.ok()) << embedder.error().message;
  return std::move(embedder).value();
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

// The tolerances: f32 embeddings agree within 1e-4 per element (of unit vectors). A bert
// reranker's score (of size ~0.3) within 1e-3: llama.cpp computes GELU through a table of f16
// inputs and outputs, which moves the score by up to ~5e-4 (with that rounding imitated, the
// scores agree within 1e-4); Trellis computes GELU in f32. A q8_0 file within 3e-3, since both
// sides also round the activations to 8 bits, where an f16-rounded GELU input may land in
// another step.
struct Case {
  const char* reference;
  const char* family;
  Pooling pooling;
  DType type;
  double max_abs;  // largest difference from llama.cpp allowed in any element or score
};

class EmbeddingReferenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(EmbeddingReferenceTest, MatchesLlamaCppAloneAndBatched) {
  const Case& c = GetParam();
  const Reference ref = read_reference(c.reference);
  ASSERT_EQ(ref.inputs.size(), ref.outputs.size());
  ASSERT_GE(ref.inputs.size(), 5u);
  std::unique_ptr<Embedder> embedder = open_model(c.family, c.pooling, c.type);
  std::vector<std::vector<TokenId>> inputs;
  for (size_t i = 0; i < ref.inputs.size(); ++i) {
    inputs.push_back(embedder->is_reranker() ? embedder->tokenize_pair(ref.query, ref.inputs[i])
                                             : embedder->tokenize(ref.inputs[i]));
    if (!ref.n_tokens.empty()) {
      EXPECT_EQ(static_cast<int64_t>(inputs[i].size()), ref.n_tokens[i]) << ref.inputs[i];
    }
  }
  Result<std::vector<std::vector<float>>> batched = embedder->embed(inputs);
  ASSERT_TRUE(batched.ok()) << batched.error().message;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Result<std::vector<std::vector<float>>> alone = embedder->embed({&inputs[i], 1});
    ASSERT_TRUE(alone.ok());
    // Batch invariance: the same bits whatever else is in the batch.
    EXPECT_EQ((*alone)[0], (*batched)[i]) << "input " << i;
    std::vector<float> got = (*batched)[i];
    if (embedder->is_reranker()) {
      got.resize(1);  // the relevance; a yes/no reranker's second value is P(no)
    } else {
      normalize_l2(got);
      EXPECT_GE(cosine(got, ref.outputs[i]), 0.9999) << "input " << i;
    }
    ASSERT_EQ(got.size(), ref.outputs[i].size());
    double worst = 0;
    for (size_t j = 0; j < got.size(); ++j) {
      worst = std::max(worst, std::abs(static_cast<double>(got[j]) - ref.outputs[i][j]));
    }
    EXPECT_LE(worst, c.max_abs) << "input " << i << ": " << ref.inputs[i];
  }
}

INSTANTIATE_TEST_SUITE_P(
    Encoders, EmbeddingReferenceTest,
    ::testing::Values(Case{"bert-tiny-mean-f32", "bert", Pooling::MEAN, DType::F32, 1e-4},
                      Case{"bert-tiny-cls-f32", "bert", Pooling::CLS, DType::F32, 1e-4},
                      Case{"nomic-bert-tiny-mean-f32", "nomic-bert", Pooling::MEAN, DType::F32,
                           1e-4},
                      Case{"bert-tiny-mean-q8_0", "bert", Pooling::MEAN, DType::Q8_0, 3e-3},
                      Case{"bert-tiny-rank-f32", "bert", Pooling::RANK, DType::F32, 1e-3},
                      Case{"qwen3-tiny-last-f32", "qwen3", Pooling::LAST, DType::F32, 1e-4},
                      Case{"qwen3-tiny-rank-f32", "qwen3", Pooling::RANK, DType::F32, 1e-4}),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string name = info.param.reference;
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      return name;
    });

}  // namespace
}  // namespace trellis
