// trellis model quantize (model/quantize_model.h): a synthesized F32 file quantized gives the file
// `model synth` writes with that type mix, byte for byte (same values, same quantizers, same
// types); the accuracy of each matrix against llama.cpp's own Q4_K_M files of the reference
// models (quantized from the same F32 files); refusals.
#include "model/quantize_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/model_presets.h"
#include "model/synth_model.h"
#include "quant/quant.h"
#include "test_support.h"

namespace trellis {
namespace {

std::vector<char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string synth(const std::string& dir, const std::string& type_name) {
  const std::string path = dir + "/tiny-" + type_name + ".gguf";
  const std::optional<QuantMix> mix = parse_quant_mix(type_name);
  const DType type = mix ? quant_mix_base(*mix) : DType::F32;
  SynthOptions options{*find_model_preset("tiny"), type, 7, "", path, 1, true, mix};
  const Status status = synthesize_model(options);
  EXPECT_TRUE(status.ok()) << status.error().message;
  return path;
}

Result<QuantizeTotals> quantize(const std::string& in, const std::string& out, QuantMix mix) {
  ThreadPool pool(2);
  return quantize_model(in, out, mix, pool, nullptr);
}

TEST(QuantizeModel, GivesTheFileSynthWritesWithTheMix) {
  const std::string dir = testing::temp_dir() + "/quantize";
  std::filesystem::create_directories(dir);
  const std::string f32 = synth(dir, "f32");
  for (const std::string name : {"q4_k_m", "q3_k_m", "q5_k_m"}) {
    const std::string want = synth(dir, name);
    const std::string got = dir + "/quantized-" + name + ".gguf";
    Result<QuantizeTotals> totals = quantize(f32, got, *parse_quant_mix(name));
    ASSERT_TRUE(totals.ok()) << totals.error().message;
    EXPECT_GT(totals->n_quantized, 20);
    EXPECT_LT(totals->bytes_out * 3, totals->bytes_in) << name;
    EXPECT_TRUE(file_bytes(got) == file_bytes(want)) << name;
  }
}

// Root mean square of (quantized - source) over the tensor.
double rmse(const GgufTensor& quantized, const GgufTensor& source) {
  const int64_t cols = source.shape[0];
  std::vector<float> a(static_cast<size_t>(cols)), b(static_cast<size_t>(cols));
  double sum = 0.0;
  for (int64_t r = 0; r < source.n_rows(); ++r) {
    dequantize_row(quantized.type, quantized.data + r * *row_bytes(quantized.type, cols), a.data(),
                   cols);
    dequantize_row(source.type, source.data + r * *row_bytes(source.type, cols), b.data(), cols);
    for (int64_t i = 0; i < cols; ++i) sum += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
  }
  return std::sqrt(sum / static_cast<double>(source.n_elements));
}

// llama.cpp quantized reference-arch's F32 files to Q4_K_M; ours from the same file must have the
// same type per tensor and an error at most 2 % above its own on every matrix.
TEST(QuantizeModel, MatchesLlamaCppsAccuracyPerTensor) {
  TRELLIS_REQUIRE_SHARED();
  const std::string dir = testing::temp_dir() + "/quantize";
  std::filesystem::create_directories(dir);
  for (const std::string arch : {"llama", "qwen2", "qwen3", "gemma3", "phi3"}) {
    const std::string base = testing::shared_dir() + "/reference-arch/" + arch + "-tiny-";
    const std::string out = dir + "/" + arch + ".gguf";
    Result<QuantizeTotals> totals = quantize(base + "f32.gguf", out, QuantMix::Q4_K_M);
    ASSERT_TRUE(totals.ok()) << totals.error().message;
    Result<GgufFile> source = GgufFile::open(base + "f32.gguf");
    Result<GgufFile> theirs = GgufFile::open(base + "q4_k_m.gguf");
    Result<GgufFile> ours = GgufFile::open(out);
    ASSERT_TRUE(source.ok() && theirs.ok() && ours.ok());
    int compared = 0;
    for (const GgufTensor& t : source->tensors()) {
      const GgufTensor* a = ours->find_tensor(t.name);
      const GgufTensor* b = theirs->find_tensor(t.name);
      ASSERT_TRUE(a != nullptr && b != nullptr) << t.name;
      EXPECT_EQ(a->type, b->type) << arch << " " << t.name;
      if (a->type == t.type || a->type != b->type) continue;
      const double mine = rmse(*a, t), reference = rmse(*b, t);
      EXPECT_LE(mine, reference * 1.02) << arch << " " << t.name << " "
                                        << dtype_name(a->type) << ": " << mine << " vs "
                                        << reference;
      std::printf("%s %-28s %-5s rmse %.6g, llama.cpp %.6g (%.3f)\n", arch.c_str(),
                  t.name.c_str(), std::string(dtype_name(a->type)).c_str(), mine, reference,
                  mine / reference);
      ++compared;
    }
    EXPECT_GE(compared, 10) << arch;
  }
}

TEST(QuantizeModel, Refusals) {
  const std::string dir = testing::temp_dir() + "/quantize";
  std::filesystem::create_directories(dir);
  const std::string q4 = synth(dir, "q4_k_m");
  Result<QuantizeTotals> again = quantize(q4, dir + "/again.gguf", QuantMix::Q8_0);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message.find("is already"), std::string::npos) << again.error().message;
  EXPECT_FALSE(std::filesystem::exists(dir + "/again.gguf"));
  const std::string f32 = synth(dir, "f32");
  Result<QuantizeTotals> same = quantize(f32, f32, QuantMix::Q8_0);
  ASSERT_FALSE(same.ok());
  EXPECT_NE(same.error().message.find("is the input"), std::string::npos);
  Result<QuantizeTotals> missing = quantize(dir + "/none.gguf", dir + "/x.gguf",
                                            QuantMix::Q4_0);
  EXPECT_FALSE(missing.ok());
  Result<QuantizeTotals> unwritable =
      quantize(f32, dir + "/no/such/dir/x.gguf", QuantMix::Q4_0);
  EXPECT_FALSE(unwritable.ok());
}

}  // namespace
}  // namespace trellis
