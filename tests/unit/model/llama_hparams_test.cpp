// Hyperparameters are read from GGUF metadata and validated.
#include "model/llama_hparams.h"

#include <gtest/gtest.h>

#include <functional>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "test_support.h"

namespace trellis {
namespace {

// Writes a metadata-only GGUF with valid llama keys, after `edit` changes some of them.
Result<LlamaHParams> read_with(const std::function<void(GgufWriter&)>& edit) {
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
  return read_llama_hparams(*file);
}

TEST(LlamaHParams, ReadsValuesAndDefaults) {
  Result<LlamaHParams> hp = read_with([](GgufWriter&) {});
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

  Result<LlamaHParams> scaled = read_with([](GgufWriter& w) {
    w.set("llama.rope.scale_linear", GgufValue{4.0f});
    w.set("llama.rope.freq_base", GgufValue{500000.0f});
  });
  ASSERT_TRUE(scaled.ok());
  EXPECT_EQ(scaled->rope_freq_scale, 0.25);
  EXPECT_EQ(scaled->rope_freq_base, 500000.0);
}

TEST(LlamaHParams, RejectsInvalidModels) {
  auto expect_error = [](const std::function<void(GgufWriter&)>& edit,
                         const std::string& fragment) {
    Result<LlamaHParams> hp = read_with(edit);
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

TEST(LlamaHParams, ReadsTheSharedModel) {
  TRELLIS_REQUIRE_SHARED();
  Result<GgufFile> file = GgufFile::open(testing::shared_dir() + "/models/stories260K.gguf");
  ASSERT_TRUE(file.ok());
  Result<LlamaHParams> hp = read_llama_hparams(*file);
  ASSERT_TRUE(hp.ok()) << hp.error().message;
  EXPECT_EQ(hp->n_vocab, 512) << "from the token list: the file has no llama.vocab_size";
  EXPECT_EQ(hp->n_layer, 5);
  EXPECT_EQ(hp->n_ff, 172);
  EXPECT_EQ(hp->head_dim(), 8);
  EXPECT_EQ(hp->n_rot, 8);
}

}  // namespace
}  // namespace trellis
