// The synthesizer writes valid, deterministic Llama GGUFs that the reader and tokenizer accept.
#include "model/synth_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>

#include "gguf/gguf_file.h"
#include "model/model_hparams.h"
#include "model/model_presets.h"
#include "quant/quant.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace trellis {
namespace {

std::string synth(const std::string& name, DType type, uint64_t seed, int threads = 0,
                  const std::string& vocab_from = "") {
  std::string path = testing::temp_dir() + "/" + name;
  SynthOptions options{*find_model_preset("tiny"), type, seed, vocab_from, path, threads, false};
  Status status = synthesize_model(options);
  EXPECT_TRUE(status.ok()) << status.error().message;
  return path;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(SynthModel, SameSeedGivesIdenticalFilesWhateverTheThreadCount) {
  std::string a = synth("a.gguf", DType::Q4_0, 7, 1);
  std::string b = synth("b.gguf", DType::Q4_0, 7, 3);
  std::string c = synth("c.gguf", DType::Q4_0, 8, 2);
  EXPECT_EQ(slurp(a), slurp(b));
  EXPECT_NE(slurp(a), slurp(c));
}

TEST(SynthModel, HasLlamaShapesAndTypes) {
  for (DType type : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0}) {
    std::string path = synth("shapes.gguf", type, 1);
    Result<GgufFile> file = GgufFile::open(path);
    ASSERT_TRUE(file.ok()) << file.error().message;
    Result<ModelHParams> hp = read_model_hparams(*file);
    ASSERT_TRUE(hp.ok()) << hp.error().message;
    const ModelHParams want = find_model_preset("tiny")->hparams;
    EXPECT_EQ(hp->n_embd, want.n_embd);
    EXPECT_EQ(hp->n_layer, want.n_layer);
    EXPECT_EQ(hp->n_head_kv, want.n_head_kv);
    EXPECT_EQ(hp->n_vocab, want.n_vocab);
    EXPECT_EQ(file->tensors().size(), static_cast<size_t>(1 + 9 * want.n_layer + 2));
    const GgufTensor* k = file->find_tensor("blk.3.attn_k.weight");
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(k->type, type);
    EXPECT_EQ(k->shape, (std::vector<int64_t>{want.n_embd, want.n_embd_kv()}));
    const GgufTensor* down = file->find_tensor("blk.0.ffn_down.weight");
    ASSERT_NE(down, nullptr);
    EXPECT_EQ(down->shape, (std::vector<int64_t>{want.n_ff, want.n_embd}));
    EXPECT_EQ(file->find_tensor("output_norm.weight")->type, DType::F32);
  }
}

TEST(SynthModel, WeightsAreSmallNormalsAndNormsAreOne) {
  std::string path = synth("stats.gguf", DType::Q8_0, 3);
  Result<GgufFile> file = GgufFile::open(path);
  ASSERT_TRUE(file.ok());
  const GgufTensor* embd = file->find_tensor("token_embd.weight");
  std::vector<float> values(static_cast<size_t>(embd->n_elements));
  dequantize_row(embd->type, embd->data, values.data(), embd->n_elements);
  double sum = 0, sum_sq = 0;
  for (float v : values) {
    sum += v;
    sum_sq += static_cast<double>(v) * v;
  }
  double mean = sum / static_cast<double>(values.size());
  double stddev = std::sqrt(sum_sq / static_cast<double>(values.size()) - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.001);
  EXPECT_NEAR(stddev, 0.02, 0.001);
  const GgufTensor* norm = file->find_tensor("blk.2.ffn_norm.weight");
  const auto* norm_values = reinterpret_cast<const float*>(norm->data);
  for (int64_t i = 0; i < norm->n_elements; ++i) ASSERT_EQ(norm_values[i], 1.0f);
}

TEST(SynthModel, BuiltInVocabTokenizesAnyText) {
  std::string path = synth("vocab.gguf", DType::F16, 0);
  Result<GgufFile> file = GgufFile::open(path);
  ASSERT_TRUE(file.ok());
  Result<Vocab> vocab = load_vocab(*file);
  ASSERT_TRUE(vocab.ok()) << vocab.error().message;
  EXPECT_EQ(vocab->size(), 2048);
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::create(std::move(vocab).value());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  for (std::string text : {"Hello world", "the cache shares its prefix",
                           "ünïcödé ✓ 🙂 中文", "tabs\tand\nnewlines", "x"}) {
    std::vector<TokenId> ids = (*tokenizer)->encode(text, true, false);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.front(), 1) << "BOS first";
    for (TokenId id : ids) EXPECT_NE(id, 0) << "no <unk>: byte fallback covers everything";
    std::string decoded = (*tokenizer)->decode(ids);
    EXPECT_NE(decoded.find(text), std::string::npos) << decoded;
  }
  // Common words are single pieces.
  std::vector<TokenId> the = (*tokenizer)->encode("the", false, false);
  EXPECT_EQ(the.size(), 1u);
}

TEST(SynthModel, VocabFromCopiesTheTokenizer) {
  TRELLIS_REQUIRE_SHARED();
  std::string source = testing::shared_dir() + "/models/stories260K.gguf";
  std::string path = synth("borrowed.gguf", DType::Q4_0, 0, 0, source);
  Result<GgufFile> file = GgufFile::open(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->find_tensor("token_embd.weight")->shape, (std::vector<int64_t>{128, 512}));
  Result<GgufFile> original = GgufFile::open(source);
  ASSERT_TRUE(original.ok());
  Result<Vocab> a = load_vocab(*file);
  Result<Vocab> b = load_vocab(*original);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->scores, b->scores);
}

TEST(SynthModel, RejectsUnsupportedTypeAndUnwritablePath) {
  SynthOptions options{*find_model_preset("tiny"),      DType::I32, 0,    "",
                       testing::temp_dir() + "/x.gguf", 1,          false};
  EXPECT_FALSE(synthesize_model(options).ok());
  options.type = DType::Q4_0;
  options.output_path = "/nonexistent-dir/x.gguf";
  EXPECT_FALSE(synthesize_model(options).ok());
  options.output_path = testing::temp_dir() + "/y.gguf";
  options.vocab_from = "/nonexistent.gguf";
  EXPECT_FALSE(synthesize_model(options).ok());
}

}  // namespace
}  // namespace trellis
