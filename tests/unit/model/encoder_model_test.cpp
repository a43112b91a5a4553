// Encoder files that lie or lack something are refused with a message naming what is wrong,
// before anything the size of their claims is allocated.
#include "model/encoder_model.h"

#include <gtest/gtest.h>

#include "model/encoder_synth.h"
#include "test_support.h"

namespace trellis {
namespace {

const std::string& tiny_bert() {
  static const std::string path = [] {
    EncoderSynthOptions options;
    options.preset = find_encoder_preset("tiny");
    options.family = find_encoder_family("bert");
    options.type = DType::Q8_0;
    options.output_path = testing::temp_dir() + "/hostile-base.gguf";
    options.show_progress = false;
    EXPECT_TRUE(synthesize_encoder(options).ok());
    return options.output_path;
  }();
  return path;
}

std::string load_error(const std::string& path) {
  Result<GgufFile> file = GgufFile::open(path);
  if (!file.ok()) return file.error().message;
  Result<std::unique_ptr<EncoderModel>> model = EncoderModel::load(*file);
  return model.ok() ? "" : model.error().message;
}

TEST(EncoderModel, TheTinyFileLoads) {
  EXPECT_EQ(load_error(tiny_bert()), "");
}

TEST(EncoderModel, RefusesFilesThatLieOrLack) {
  struct Case {
    std::string name, key;
    std::optional<GgufValue> value;
    std::string dropped, expected;
  };
  const Case cases[] = {
      {"many-layers", "bert.block_count", GgufValue{uint32_t{1} << 30}, "", "blk.2."},
      {"no-pooling", "bert.pooling_type", GgufValue{uint32_t{0}}, "", "pooling_type 0"},
      {"bad-pooling", "bert.pooling_type", GgufValue{uint32_t{9}}, "", "pooling_type 9"},
      {"causal", "bert.attention.causal", GgufValue{true}, "", "causal"},
      {"odd-heads", "bert.attention.head_count", GgufValue{uint32_t{3}}, "", "head_count 3"},
      {"zero-width", "bert.embedding_length", GgufValue{uint32_t{0}}, "", "must be positive"},
      {"long-context", "bert.context_length", GgufValue{uint32_t{1} << 30}, "",
       "position_embd.weight"},
      {"no-ffn", "", std::nullopt, "blk.1.ffn_up.weight", "blk.1.ffn_up.weight"},
      {"no-norm", "", std::nullopt, "token_embd_norm.bias", "token_embd_norm.bias"},
  };
  for (const Case& c : cases) {
    const std::string error =
        load_error(testing::rewrite_gguf(tiny_bert(), c.name, c.key, c.value, c.dropped));
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.name << ": " << error;
  }
}

}  // namespace
}  // namespace trellis
