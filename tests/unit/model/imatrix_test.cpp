// Importance matrices: llama.cpp's GGUF form written and read back (model/imatrix_file.h), the
// collector run through the engine (model/imatrix_collector.h), and quantize_model weighing each
// matrix by its entry (model/quantize_model.h).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "engine/engine.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/imatrix_collector.h"
#include "model/imatrix_file.h"
#include "model/model_presets.h"
#include "model/quantize_model.h"
#include "model/synth_model.h"
#include "quant/quant.h"
#include "test_support.h"

namespace trellis {
namespace {

Imatrix two_entries() {
  Imatrix m;
  m.datasets = {"wiki.txt"};
  m.chunk_count = 3;
  m.chunk_size = 512;
  m.entries["blk.0.attn_q.weight"] = ImatrixEntry{4, {4, 8, 0, 2}, {2}};
  m.entries["blk.0.ffn_down_exps.weight"] = ImatrixEntry{2, {3, 6, 1, 1}, {3, 0}};  // two experts
  return m;
}

TEST(ImatrixFile, WritesAndReadsLlamaCppsForm) {
  const std::string path = testing::temp_dir() + "/roundtrip.imatrix.gguf";
  ASSERT_TRUE(write_imatrix(two_entries(), path).ok());
  Result<GgufFile> raw = GgufFile::open(path);
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(*raw->get_string("general.type"), "imatrix");
  ASSERT_NE(raw->find_tensor("blk.0.attn_q.weight.in_sum2"), nullptr);
  EXPECT_EQ(raw->find_tensor("blk.0.ffn_down_exps.weight.in_sum2")->shape,
            (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(raw->find_tensor("blk.0.ffn_down_exps.weight.counts")->shape,
            (std::vector<int64_t>{1, 2}));
  // Every tensor padded, the last too: the size is the data section's whole.
  EXPECT_EQ(raw->file_size() % 32, 0u);

  Result<Imatrix> read = read_imatrix(path);
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(read->datasets, std::vector<std::string>{"wiki.txt"});
  EXPECT_EQ(read->chunk_count, 3u);
  EXPECT_EQ(read->chunk_size, 512u);
  EXPECT_EQ(*read->importance("blk.0.attn_q.weight"), (std::vector<float>{2, 4, 0, 1}));
  // An expert nothing reached weighs its columns 1, as llama.cpp reads it.
  EXPECT_EQ(*read->importance("blk.0.ffn_down_exps.weight"), (std::vector<float>{1, 2, 1, 1}));
  EXPECT_FALSE(read->importance("blk.1.attn_q.weight").has_value());
}

TEST(ImatrixFile, RefusesWhatIsNotOne) {
  const std::string dir = testing::temp_dir();
  EXPECT_FALSE(read_imatrix(dir + "/missing.gguf").ok());
  // A model file is no importance matrix.
  GgufWriter model;
  model.set("general.type", GgufValue{std::string("model")});
  ASSERT_TRUE(model.begin(dir + "/model.gguf").ok());
  ASSERT_TRUE(model.finish().ok());
  Result<Imatrix> not_one = read_imatrix(dir + "/model.gguf");
  ASSERT_FALSE(not_one.ok());
  EXPECT_NE(not_one.error().message.find("not an importance matrix"), std::string::npos);
  // Sums without counts, and a negative sum.
  Imatrix broken = two_entries();
  broken.entries["blk.0.attn_q.weight"].sums[1] = -1;
  ASSERT_TRUE(write_imatrix(broken, dir + "/negative.gguf").ok());
  Result<Imatrix> negative = read_imatrix(dir + "/negative.gguf");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.error().message.find("negative or non-finite"), std::string::npos);
  // 4 sums and 2 counts: 4 do not fill 2 rows of 4.
  GgufWriter mismatched;
  mismatched.set("general.type", GgufValue{std::string("imatrix")});
  ASSERT_TRUE(mismatched.add_tensor("a.weight.in_sum2", DType::F32, {4, 1}).ok());
  ASSERT_TRUE(mismatched.add_tensor("a.weight.counts", DType::F32, {1, 2}).ok());
  ASSERT_TRUE(mismatched.begin(dir + "/mismatch.gguf").ok());
  const float values[4] = {1, 1, 1, 1};
  const auto* bytes = reinterpret_cast<const uint8_t*>(values);
  ASSERT_TRUE(mismatched.write_tensor_data({bytes, 16}).ok());
  ASSERT_TRUE(mismatched.write_tensor_data({bytes, 8}).ok());
  ASSERT_TRUE(mismatched.finish().ok());
  Result<Imatrix> mismatch = read_imatrix(dir + "/mismatch.gguf");
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.error().message.find("do not match"), std::string::npos);
}

TEST(ImatrixCollector, SumsTheSquaresOfEachMatrixsInput) {
  const std::string& path = testing::tiny_engine_model();
  Result<GgufFile> file = GgufFile::open(path);
  ASSERT_TRUE(file.ok());
  ImatrixCollector collector(*file);
  EngineConfig config;
  config.n_threads = 1;
  config.prefix_cache.enabled = false;
  config.activation_observer = &collector;
  Result<std::unique_ptr<Engine>> engine = Engine::create(path, config);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  std::vector<TokenId> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(3 + (i * 7) % 50);
  EngineRequest request;
  request.prompt = prompt;
  request.max_tokens = 0;
  ASSERT_TRUE((*engine)->run(std::move(request)).ok());
  EXPECT_EQ(collector.n_rows(), 40);
  const Imatrix m = collector.take({"t.txt"}, 1, 40);
  const int64_t n_embd = file->find_tensor("blk.0.attn_q.weight")->shape[0];
  const int64_t n_ff = file->find_tensor("blk.0.ffn_down.weight")->shape[0];
  const ImatrixEntry& q = m.entries.at("blk.0.attn_q.weight");
  EXPECT_EQ(q.n_cols, n_embd);
  EXPECT_EQ(q.counts, std::vector<double>{40});
  // Matrices of one input share its sums; each input's width is its matrices' row length.
  EXPECT_EQ(m.entries.at("blk.0.attn_k.weight").sums, q.sums);
  EXPECT_EQ(m.entries.at("blk.0.ffn_gate.weight").sums, m.entries.at("blk.0.ffn_up.weight").sums);
  EXPECT_NE(m.entries.at("blk.0.ffn_gate.weight").sums, q.sums);
  EXPECT_EQ(m.entries.at("blk.0.ffn_down.weight").n_cols, n_ff);
  for (const auto& [name, entry] : m.entries) {
    double total = 0;
    for (double v : entry.sums) total += v;
    EXPECT_GT(total, 0) << name;
  }
  EXPECT_FALSE(m.entries.contains("output.weight"));
}

// Per matrix, the error weighted by the importance the file gives it: lower with the matrix
// weighing the quantization than without, for every type the mix picks.
TEST(QuantizeModel, AnImportanceMatrixLowersEachMatrixsWeightedError) {
  const std::string dir = testing::temp_dir() + "/imatrix-quantize";
  std::filesystem::create_directories(dir);
  const std::string f32 = dir + "/f32.gguf";
  ModelPreset preset = *find_model_preset("tiny");
  preset.hparams.n_embd = 256;  // rows of 256: the K types themselves, not their fallbacks
  preset.hparams.n_ff = 512;
  ASSERT_TRUE(synthesize_model(SynthOptions{preset, DType::F32, 3, "", f32, 1, true}).ok());
  Result<GgufFile> source = GgufFile::open(f32);
  ASSERT_TRUE(source.ok());
  Imatrix imatrix;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> exponent(-2.0f, 2.0f);
  for (const GgufTensor& t : source->tensors()) {
    if (!t.name.starts_with("blk.") || t.shape.size() != 2) continue;
    ImatrixEntry entry{t.shape[0], {}, {1}};
    for (int64_t c = 0; c < t.shape[0]; ++c) entry.sums.push_back(std::pow(10.0f, exponent(rng)));
    imatrix.entries[t.name] = entry;
  }
  ThreadPool pool(2);
  for (QuantMix mix : {QuantMix::Q4_K_M, QuantMix::Q3_K_M, QuantMix::Q6_K, QuantMix::Q4_0}) {
    const std::string plain = dir + "/plain.gguf", weighted = dir + "/weighted.gguf";
    ASSERT_TRUE(quantize_model(f32, plain, mix, pool, nullptr).ok());
    int64_t n_weighted = 0;
    ASSERT_TRUE(quantize_model(f32, weighted, mix, pool,
                               [&](const QuantizedTensor& t) { n_weighted += t.weighted; },
                               &imatrix, "made-up.gguf")
                    .ok());
    EXPECT_EQ(n_weighted, static_cast<int64_t>(imatrix.entries.size()));
    Result<GgufFile> a = GgufFile::open(plain), b = GgufFile::open(weighted);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(*b->get_string("quantize.imatrix.file"), "made-up.gguf");
    for (const auto& [name, entry] : imatrix.entries) {
      const GgufTensor& src = *source->find_tensor(name);
      const std::vector<float> w = *imatrix.importance(name);
      double errors[2] = {0, 0};
      for (int which = 0; which < 2; ++which) {
        const GgufTensor& q = *(which == 0 ? a : b)->find_tensor(name);
        std::vector<float> row(static_cast<size_t>(src.shape[0]));
        for (int64_t r = 0; r < src.n_rows(); ++r) {
          dequantize_row(q.type, q.data + r * *row_bytes(q.type, src.shape[0]), row.data(),
                         src.shape[0]);
          const float* x = reinterpret_cast<const float*>(src.data) + r * src.shape[0];
          for (int64_t c = 0; c < src.shape[0]; ++c)
            errors[which] += w[static_cast<size_t>(c)] * std::pow(row[static_cast<size_t>(c)] - x[c], 2.0);
        }
      }
      EXPECT_LT(errors[1], 0.95 * errors[0]) << static_cast<int>(mix) << " " << name;
    }
  }
  // An entry whose width is not the tensor's is refused, naming the tensor.
  imatrix.entries.begin()->second = ImatrixEntry{3, {1, 1, 1}, {1}};
  Result<QuantizeTotals> refused =
      quantize_model(f32, dir + "/refused.gguf", QuantMix::Q4_K_M, pool, nullptr, &imatrix, "x");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find(imatrix.entries.begin()->first), std::string::npos)
      << refused.error().message;
  EXPECT_FALSE(std::filesystem::exists(dir + "/refused.gguf"));
}

}  // namespace
}  // namespace trellis
