// The writer's files read back identically: every metadata type, nested arrays, tensor layout.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <limits>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "test_support.h"

namespace trellis {
namespace {

std::string temp_path(const std::string& name) {
  return testing::temp_dir() + "/" + name;
}

GgufValue nested_array() {
  GgufArray inner1{GgufType::INT16, {GgufValue{int16_t{-1}}, GgufValue{int16_t{2}}}};
  GgufArray inner2{GgufType::INT16, {GgufValue{int16_t{300}}}};
  return GgufValue{GgufArray{GgufType::ARRAY, {GgufValue{inner1}, GgufValue{inner2}}}};
}

TEST(GgufRoundTrip, EveryMetadataTypeReadsBack) {
  GgufWriter writer;
  writer.set("u8", GgufValue{uint8_t{200}});
  writer.set("i8", GgufValue{int8_t{-100}});
  writer.set("u16", GgufValue{uint16_t{60000}});
  writer.set("i16", GgufValue{int16_t{-30000}});
  writer.set("u32", GgufValue{uint32_t{4000000000u}});
  writer.set("i32", GgufValue{int32_t{-2000000000}});
  writer.set("f32", GgufValue{1.5f});
  writer.set("bool", GgufValue{true});
  writer.set("str", GgufValue{std::string("héllo")});
  writer.set("u64", GgufValue{uint64_t{std::numeric_limits<uint64_t>::max()}});
  writer.set("i64", GgufValue{int64_t{-5}});
  writer.set("f64", GgufValue{0.1});
  writer.set("strings", gguf_string_array({"a", "", "ccc"}));
  writer.set("nested", nested_array());
  std::string path = temp_path("meta.gguf");
  ASSERT_TRUE(writer.begin(path).ok());
  ASSERT_TRUE(writer.finish().ok());

  Result<GgufFile> file = GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_EQ(file->version(), 3u);
  ASSERT_EQ(file->metadata().size(), 14u);
  EXPECT_EQ(file->metadata()[0].key, "u8");
  EXPECT_EQ(*file->get_int("u8"), 200);
  EXPECT_EQ(*file->get_int("i8"), -100);
  EXPECT_EQ(*file->get_int("u16"), 60000);
  EXPECT_EQ(*file->get_int("i16"), -30000);
  EXPECT_EQ(*file->get_u32("u32"), 4000000000u);
  EXPECT_EQ(*file->get_int("i32"), -2000000000);
  EXPECT_EQ(*file->get_float("f32"), 1.5);
  EXPECT_TRUE(*file->get_bool("bool"));
  EXPECT_EQ(*file->get_string("str"), "héllo");
  EXPECT_FALSE(file->get_int("u64").ok()) << "uint64 max does not fit int64";
  EXPECT_EQ(std::get<uint64_t>(file->find("u64")->storage), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(*file->get_int("i64"), -5);
  EXPECT_EQ(*file->get_float("f64"), 0.1);
  const GgufArray* strings = *file->get_array("strings");
  ASSERT_EQ(strings->items.size(), 3u);
  EXPECT_EQ(std::get<std::string>(strings->items[2].storage), "ccc");
  const GgufArray* nested = *file->get_array("nested");
  ASSERT_EQ(nested->item_type, GgufType::ARRAY);
  const auto& inner = std::get<GgufArray>(nested->items[0].storage);
  EXPECT_EQ(std::get<int16_t>(inner.items[0].storage), -1);
  EXPECT_EQ(std::get<int16_t>(std::get<GgufArray>(nested->items[1].storage).items[0].storage), 300);
}

TEST(GgufRoundTrip, TypedLookupsReportMissingAndMistypedKeys) {
  GgufWriter writer;
  writer.set("name", GgufValue{std::string("x")});
  writer.set("count", GgufValue{uint32_t{7}});
  std::string path = temp_path("lookups.gguf");
  ASSERT_TRUE(writer.begin(path).ok());
  ASSERT_TRUE(writer.finish().ok());
  Result<GgufFile> file = GgufFile::open(path);
  ASSERT_TRUE(file.ok());
  Result<int64_t> missing = file->get_int("absent");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("absent"), std::string::npos);
  EXPECT_NE(missing.error().message.find(path), std::string::npos);
  Result<int64_t> mistyped = file->get_int("name");
  ASSERT_FALSE(mistyped.ok());
  EXPECT_NE(mistyped.error().message.find("expected an integer"), std::string::npos);
  EXPECT_EQ(*file->get_int_or("absent", 42), 42);
  EXPECT_FALSE(file->get_int_or("name", 42).ok());
  EXPECT_EQ(*file->get_string_or("absent", "d"), "d");
  EXPECT_EQ(*file->get_int("count"), 7);
}

TEST(GgufRoundTrip, TensorsAreAlignedAndKeepTheirBytes) {
  GgufWriter writer;
  writer.set_alignment(64);
  std::vector<float> a = {1.0f, 2.0f, 3.0f};  // 12 bytes: forces padding before the next tensor
  std::vector<uint8_t> b(34);                 // one q8_0 block
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 7);
  ASSERT_EQ(*writer.add_tensor("a", DType::F32, {3}), 12u);
  ASSERT_EQ(*writer.add_tensor("b", DType::Q8_0, {32, 1}), 34u);
  EXPECT_FALSE(writer.add_tensor("bad", DType::Q4_0, {20}).ok());
  std::string path = temp_path("tensors.gguf");
  ASSERT_TRUE(writer.begin(path).ok());
  ASSERT_TRUE(writer.write_tensor_data({reinterpret_cast<const uint8_t*>(a.data()), 12}).ok());
  ASSERT_TRUE(writer.write_tensor_data({b.data(), 10}).ok());  // in two chunks
  ASSERT_TRUE(writer.write_tensor_data({b.data() + 10, 24}).ok());
  ASSERT_TRUE(writer.finish().ok());

  Result<GgufFile> file = GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_EQ(file->alignment(), 64u);
  EXPECT_EQ(file->data_offset() % 64, 0u);
  ASSERT_EQ(file->tensors().size(), 2u);
  const GgufTensor* ta = file->find_tensor("a");
  const GgufTensor* tb = file->find_tensor("b");
  ASSERT_NE(ta, nullptr);
  ASSERT_NE(tb, nullptr);
  EXPECT_EQ(ta->offset, 0u);
  EXPECT_EQ(tb->offset, 64u);
  EXPECT_EQ(tb->type, DType::Q8_0);
  EXPECT_EQ(tb->shape, (std::vector<int64_t>{32, 1}));
  EXPECT_EQ(tb->n_elements, 32);
  EXPECT_EQ(std::memcmp(ta->data, a.data(), 12), 0);
  EXPECT_EQ(std::memcmp(tb->data, b.data(), 34), 0);
  // The last tensor is padded to the alignment too (64 + 34 bytes, up to 128).
  EXPECT_EQ(file->file_size(), file->data_offset() + 128);
}

TEST(GgufRoundTrip, WriterRejectsMisuse) {
  GgufWriter writer;
  ASSERT_TRUE(writer.add_tensor("t", DType::F32, {4}).ok());
  std::string path = temp_path("misuse.gguf");
  ASSERT_TRUE(writer.begin(path).ok());
  std::vector<uint8_t> too_much(20);
  EXPECT_FALSE(writer.write_tensor_data(too_much).ok());
  EXPECT_FALSE(writer.finish().ok()) << "tensor t never got its bytes";
  GgufWriter unwritable;
  EXPECT_FALSE(unwritable.begin("/nonexistent-dir/x.gguf").ok());
}

TEST(GgufRoundTrip, CopiedMetadataFromARealModelReadsBack) {
  TRELLIS_REQUIRE_SHARED();
  Result<GgufFile> source = GgufFile::open(testing::shared_dir() + "/models/stories260K.gguf");
  ASSERT_TRUE(source.ok()) << source.error().message;
  GgufWriter writer;
  writer.copy_metadata(*source, "tokenizer.");
  std::string path = temp_path("copied.gguf");
  ASSERT_TRUE(writer.begin(path).ok());
  ASSERT_TRUE(writer.finish().ok());
  Result<GgufFile> copy = GgufFile::open(path);
  ASSERT_TRUE(copy.ok()) << copy.error().message;
  const GgufArray* tokens = *copy->get_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens->items.size(), 512u);
  EXPECT_EQ(std::get<std::string>(tokens->items[1].storage), "<s>");
  EXPECT_FALSE(copy->has("llama.block_count"));
}

TEST(GgufReader, ReadsTheSharedModels) {
  TRELLIS_REQUIRE_SHARED();
  Result<GgufFile> file = GgufFile::open(testing::shared_dir() + "/models/stories260K.gguf");
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->metadata().size(), 19u);
  EXPECT_EQ(file->tensors().size(), 48u);
  EXPECT_EQ(file->data_offset(), 14176u);
  EXPECT_EQ(*file->get_string("general.architecture"), "llama");
  EXPECT_EQ(*file->get_int("llama.embedding_length"), 64);
  EXPECT_EQ(*file->get_int("llama.attention.head_count_kv"), 4);
  EXPECT_NEAR(*file->get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-10);
  const GgufTensor* embd = file->find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->shape, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(embd->type, DType::F32);
  EXPECT_EQ(embd->n_rows(), 512);
  // llama2.c ties the output head to the embeddings; the converter stored the same bytes twice.
  const GgufTensor* output = file->find_tensor("output.weight");
  ASSERT_NE(output, nullptr);
  EXPECT_EQ(std::memcmp(embd->data, output->data, embd->n_bytes), 0);

  Result<GgufFile> f16 = GgufFile::open(testing::shared_dir() + "/models/llama-2-tiny-random.gguf");
  ASSERT_TRUE(f16.ok()) << f16.error().message;
  EXPECT_EQ(f16->find_tensor("blk.0.attn_q.weight")->type, DType::F16);
  EXPECT_EQ(f16->data_offset(), 724416u);
}

}  // namespace
}  // namespace trellis
