// load_vocab on GGUF images built in memory, and on the shared vocab files when present.
#include "tokenizer/vocab.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_value.h"
#include "test_support.h"

namespace trellis {
namespace {

// Serializes metadata into a GGUF v3 image with no tensors (enough for load_vocab).
class GgufImage {
 public:
  void set(const std::string& key, GgufValue value) { kvs_.push_back({key, std::move(value)}); }

  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> out;
    put_u32(out, kGgufMagic);
    put_u32(out, 3);
    put_u64(out, 0);  // tensors
    put_u64(out, kvs_.size());
    for (const GgufKv& kv : kvs_) {
      put_string(out, kv.key);
      put_u32(out, static_cast<uint32_t>(kv.value.type()));
      put_value(out, kv.value);
    }
    while (out.size() % kGgufDefaultAlignment != 0) out.push_back(0);
    return out;
  }

 private:
  static void put_raw(std::vector<uint8_t>& out, const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    out.insert(out.end(), p, p + n);
  }
  static void put_u32(std::vector<uint8_t>& out, uint32_t v) { put_raw(out, &v, sizeof(v)); }
  static void put_u64(std::vector<uint8_t>& out, uint64_t v) { put_raw(out, &v, sizeof(v)); }
  static void put_string(std::vector<uint8_t>& out, const std::string& s) {
    put_u64(out, s.size());
    put_raw(out, s.data(), s.size());
  }
  static void put_value(std::vector<uint8_t>& out, const GgufValue& value) {
    std::visit(
        [&out](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>) {
            put_string(out, v);
          } else if constexpr (std::is_same_v<T, GgufArray>) {
            put_u32(out, static_cast<uint32_t>(v.item_type));
            put_u64(out, v.items.size());
            for (const GgufValue& item : v.items) put_value(out, item);
          } else if constexpr (std::is_same_v<T, bool>) {
            uint8_t b = v ? 1 : 0;
            put_raw(out, &b, 1);
          } else {
            put_raw(out, &v, sizeof(v));
          }
        },
        value.storage);
  }

  std::vector<GgufKv> kvs_;
};

GgufValue str(const std::string& s) {
  return GgufValue{s};
}

// A 6-token SPM vocab: <unk> <s> </s> ▁a b ▁ab.
GgufImage spm_image() {
  GgufImage image;
  image.set("tokenizer.ggml.model", str("llama"));
  image.set("tokenizer.ggml.tokens", gguf_string_array({"<unk>", "<s>", "</s>",
                                                        "\xE2\x96\x81"
                                                        "a",
                                                        "b",
                                                        "\xE2\x96\x81"
                                                        "ab"}));
  image.set("tokenizer.ggml.scores", gguf_f32_array({0, 0, 0, -1, -2, -3}));
  image.set("tokenizer.ggml.token_type", gguf_i32_array({2, 3, 3, 1, 1, 1}));
  return image;
}

// Keeps the bytes alive beside the parsed file.
struct Loaded {
  std::vector<uint8_t> bytes;
  Result<Vocab> vocab = Error{"not loaded"};
};

Loaded load(const GgufImage& image) {
  Loaded loaded;
  loaded.bytes = image.bytes();
  Result<GgufFile> file = GgufFile::parse(loaded.bytes, "test.gguf");
  if (!file.ok()) {
    loaded.vocab = file.error();
    return loaded;
  }
  loaded.vocab = load_vocab(*file);
  return loaded;
}

TEST(VocabTest, SpmDefaultsFollowLlamaCpp) {
  Loaded loaded = load(spm_image());
  ASSERT_TRUE(loaded.vocab.ok()) << loaded.vocab.error().message;
  const Vocab& vocab = *loaded.vocab;
  EXPECT_EQ(vocab.kind, TokenizerKind::SPM);
  EXPECT_EQ(vocab.model, "llama");
  EXPECT_EQ(vocab.pre, "default");
  EXPECT_EQ(vocab.size(), 6);
  EXPECT_EQ(vocab.tokens[5],
            "\xE2\x96\x81"
            "ab");
  EXPECT_FLOAT_EQ(vocab.scores[4], -2.0f);
  EXPECT_EQ(vocab.types[0], TokenType::UNKNOWN);
  EXPECT_EQ(vocab.types[1], TokenType::CONTROL);
  // No id keys: llama.cpp's SentencePiece layout (UNK 0, BOS 1, EOS 2), BOS and space prefix on.
  EXPECT_EQ(vocab.bos_id, 1);
  EXPECT_EQ(vocab.eos_id, 2);
  EXPECT_EQ(vocab.unk_id, 0);
  EXPECT_EQ(vocab.pad_id, kNoToken);
  EXPECT_TRUE(vocab.add_bos);
  EXPECT_FALSE(vocab.add_eos);
  EXPECT_TRUE(vocab.add_space_prefix);
}

TEST(VocabTest, KeysOverrideDefaults) {
  GgufImage image = spm_image();
  image.set("tokenizer.ggml.bos_token_id", GgufValue{uint32_t{3}});
  image.set("tokenizer.ggml.eos_token_id", GgufValue{int32_t{4}});
  image.set("tokenizer.ggml.padding_token_id", GgufValue{uint32_t{5}});
  image.set("tokenizer.ggml.add_bos_token", GgufValue{false});
  image.set("tokenizer.ggml.add_eos_token", GgufValue{true});
  image.set("tokenizer.ggml.add_space_prefix", GgufValue{false});
  image.set("tokenizer.ggml.pre", str("custom"));
  Loaded loaded = load(image);
  ASSERT_TRUE(loaded.vocab.ok()) << loaded.vocab.error().message;
  EXPECT_EQ(loaded.vocab->bos_id, 3);
  EXPECT_EQ(loaded.vocab->eos_id, 4);
  EXPECT_EQ(loaded.vocab->pad_id, 5);
  EXPECT_FALSE(loaded.vocab->add_bos);
  EXPECT_TRUE(loaded.vocab->add_eos);
  EXPECT_FALSE(loaded.vocab->add_space_prefix);
  EXPECT_EQ(loaded.vocab->pre, "custom");
}

TEST(VocabTest, AllOnesIdMeansNone) {
  GgufImage image = spm_image();
  image.set("tokenizer.ggml.padding_token_id", GgufValue{uint32_t{0xFFFFFFFF}});
  image.set("tokenizer.ggml.unknown_token_id", GgufValue{int32_t{-1}});
  Loaded loaded = load(image);
  ASSERT_TRUE(loaded.vocab.ok()) << loaded.vocab.error().message;
  EXPECT_EQ(loaded.vocab->pad_id, kNoToken);
  EXPECT_EQ(loaded.vocab->unk_id, kNoToken);
}

TEST(VocabTest, TypesDefaultToNormalAndScoresToEmpty) {
  GgufImage image;
  image.set("tokenizer.ggml.model", str("llama"));
  image.set("tokenizer.ggml.tokens", gguf_string_array({"a", "b", "c"}));
  Loaded loaded = load(image);
  ASSERT_TRUE(loaded.vocab.ok()) << loaded.vocab.error().message;
  EXPECT_EQ(loaded.vocab->types, std::vector<TokenType>(3, TokenType::NORMAL));
  EXPECT_TRUE(loaded.vocab->scores.empty());
}

TEST(VocabTest, SpmDefaultIdsOutsideATinyVocabAreNone) {
  GgufImage image;
  image.set("tokenizer.ggml.model", str("llama"));
  image.set("tokenizer.ggml.tokens", gguf_string_array({"a", "b"}));
  Loaded loaded = load(image);
  ASSERT_TRUE(loaded.vocab.ok()) << loaded.vocab.error().message;
  EXPECT_EQ(loaded.vocab->unk_id, 0);
  EXPECT_EQ(loaded.vocab->bos_id, 1);
  EXPECT_EQ(loaded.vocab->eos_id, kNoToken);
}

TEST(VocabTest, UnknownModelIsNamed) {
  GgufImage rwkv;
  rwkv.set("tokenizer.ggml.model", str("rwkv"));
  rwkv.set("tokenizer.ggml.tokens", gguf_string_array({"[PAD]"}));
  Loaded loaded = load(rwkv);
  ASSERT_FALSE(loaded.vocab.ok());
  EXPECT_NE(loaded.vocab.error().message.find("'rwkv'"), std::string::npos)
      << loaded.vocab.error().message;
  EXPECT_NE(loaded.vocab.error().message.find("test.gguf"), std::string::npos);
}

TEST(VocabTest, BertIsWordPieceWithClsAndSepAroundTheText) {
  GgufImage bert;
  bert.set("tokenizer.ggml.model", str("bert"));
  bert.set("tokenizer.ggml.tokens", gguf_string_array({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"}));
  Loaded loaded = load(bert);
  ASSERT_TRUE(loaded.vocab.ok()) << loaded.vocab.error().message;
  EXPECT_EQ(loaded.vocab->kind, TokenizerKind::WORDPIECE);
  EXPECT_EQ(loaded.vocab->bos_id, 2);
  EXPECT_EQ(loaded.vocab->eos_id, 3);
  EXPECT_EQ(loaded.vocab->unk_id, 1);
  EXPECT_EQ(loaded.vocab->pad_id, 0);
  EXPECT_TRUE(loaded.vocab->add_bos);
  EXPECT_TRUE(loaded.vocab->add_eos);
  // Without those tokens there is nothing to add (no error: the keys did not ask for it).
  GgufImage bare;
  bare.set("tokenizer.ggml.model", str("bert"));
  bare.set("tokenizer.ggml.tokens", gguf_string_array({"a", "b"}));
  Loaded plain = load(bare);
  ASSERT_TRUE(plain.vocab.ok()) << plain.vocab.error().message;
  EXPECT_FALSE(plain.vocab->add_bos);
  EXPECT_FALSE(plain.vocab->add_eos);
}

TEST(VocabTest, MissingModelOrTokensIsAnError) {
  GgufImage no_model;
  no_model.set("tokenizer.ggml.tokens", gguf_string_array({"a"}));
  EXPECT_FALSE(load(no_model).vocab.ok());
  GgufImage no_tokens;
  no_tokens.set("tokenizer.ggml.model", str("llama"));
  EXPECT_FALSE(load(no_tokens).vocab.ok());
}

TEST(VocabTest, ArrayLengthsMustAgree) {
  GgufImage scores;
  scores.set("tokenizer.ggml.model", str("llama"));
  scores.set("tokenizer.ggml.tokens", gguf_string_array({"a", "b"}));
  scores.set("tokenizer.ggml.scores", gguf_f32_array({0}));
  Loaded a = load(scores);
  ASSERT_FALSE(a.vocab.ok());
  EXPECT_NE(a.vocab.error().message.find("scores"), std::string::npos) << a.vocab.error().message;

  GgufImage types;
  types.set("tokenizer.ggml.model", str("llama"));
  types.set("tokenizer.ggml.tokens", gguf_string_array({"a", "b"}));
  types.set("tokenizer.ggml.token_type", gguf_i32_array({1, 1, 1}));
  Loaded b = load(types);
  ASSERT_FALSE(b.vocab.ok());
  EXPECT_NE(b.vocab.error().message.find("token_type"), std::string::npos)
      << b.vocab.error().message;
}

TEST(VocabTest, TokenTypeOutOfRangeIsAnError) {
  GgufImage image;
  image.set("tokenizer.ggml.model", str("llama"));
  image.set("tokenizer.ggml.tokens", gguf_string_array({"a", "b"}));
  image.set("tokenizer.ggml.token_type", gguf_i32_array({1, 7}));
  Loaded loaded = load(image);
  ASSERT_FALSE(loaded.vocab.ok());
  EXPECT_NE(loaded.vocab.error().message.find("[1] = 7"), std::string::npos)
      << loaded.vocab.error().message;
}

TEST(VocabTest, WrongArrayItemTypesAreErrors) {
  GgufImage tokens;
  tokens.set("tokenizer.ggml.model", str("llama"));
  tokens.set("tokenizer.ggml.tokens", gguf_i32_array({1, 2}));
  EXPECT_FALSE(load(tokens).vocab.ok());
  GgufImage bad;
  bad.set("tokenizer.ggml.model", str("llama"));
  bad.set("tokenizer.ggml.tokens", gguf_string_array({"a"}));
  bad.set("tokenizer.ggml.scores", gguf_string_array({"x"}));
  EXPECT_FALSE(load(bad).vocab.ok());
}

TEST(VocabTest, SpecialIdOutsideVocabIsAnError) {
  GgufImage image = spm_image();
  image.set("tokenizer.ggml.eos_token_id", GgufValue{uint32_t{6}});
  Loaded loaded = load(image);
  ASSERT_FALSE(loaded.vocab.ok());
  EXPECT_NE(loaded.vocab.error().message.find("eos_token_id"), std::string::npos)
      << loaded.vocab.error().message;
}

TEST(VocabTest, ExplicitAddBosWithoutBosIsAnError) {
  GgufImage image = spm_image();
  image.set("tokenizer.ggml.bos_token_id", GgufValue{uint32_t{0xFFFFFFFF}});
  image.set("tokenizer.ggml.add_bos_token", GgufValue{true});
  EXPECT_FALSE(load(image).vocab.ok());

  // Without the key the default simply does not apply.
  GgufImage implicit = spm_image();
  implicit.set("tokenizer.ggml.bos_token_id", GgufValue{uint32_t{0xFFFFFFFF}});
  Loaded loaded = load(implicit);
  ASSERT_TRUE(loaded.vocab.ok()) << loaded.vocab.error().message;
  EXPECT_FALSE(loaded.vocab->add_bos);
}

GgufImage bpe_image(const std::string& pre) {
  GgufImage image;
  image.set("tokenizer.ggml.model", str("gpt2"));
  image.set("tokenizer.ggml.pre", str(pre));
  image.set("tokenizer.ggml.tokens", gguf_string_array({"a", "b", "ab", "<|end|>"}));
  image.set("tokenizer.ggml.token_type", gguf_i32_array({1, 1, 1, 3}));
  image.set("tokenizer.ggml.merges", gguf_string_array({"a b"}));
  image.set("tokenizer.ggml.bos_token_id", GgufValue{uint32_t{3}});
  image.set("tokenizer.ggml.eos_token_id", GgufValue{uint32_t{3}});
  return image;
}

TEST(VocabTest, BpeAddsBosOnlyForPreTypesThatDoInLlamaCpp) {
  for (const char* pre : {"llama-bpe", "llama3", "llama-v3", "falcon3", "tekken", "chameleon"}) {
    Loaded loaded = load(bpe_image(pre));
    ASSERT_TRUE(loaded.vocab.ok()) << loaded.vocab.error().message;
    EXPECT_TRUE(loaded.vocab->add_bos) << pre;
  }
  for (const char* pre : {"gpt-2", "qwen2", "falcon", "mpt", "starcoder", "refact"}) {
    Loaded loaded = load(bpe_image(pre));
    ASSERT_TRUE(loaded.vocab.ok()) << loaded.vocab.error().message;
    EXPECT_FALSE(loaded.vocab->add_bos) << pre;
  }
  Loaded loaded = load(bpe_image("gpt-2"));
  EXPECT_EQ(loaded.vocab->kind, TokenizerKind::BPE);
  EXPECT_FALSE(loaded.vocab->add_space_prefix);
  EXPECT_FALSE(loaded.vocab->add_eos);
  EXPECT_EQ(loaded.vocab->merges, std::vector<std::string>{"a b"});
  EXPECT_EQ(loaded.vocab->unk_id, kNoToken);

  GgufImage explicit_bos = bpe_image("llama-bpe");
  explicit_bos.set("tokenizer.ggml.add_bos_token", GgufValue{false});
  EXPECT_FALSE(load(explicit_bos).vocab->add_bos);
}

TEST(VocabTest, BpeWithoutMergesIsAnError) {
  GgufImage image;
  image.set("tokenizer.ggml.model", str("gpt2"));
  image.set("tokenizer.ggml.tokens", gguf_string_array({"a"}));
  Loaded loaded = load(image);
  ASSERT_FALSE(loaded.vocab.ok());
  EXPECT_NE(loaded.vocab.error().message.find("merges"), std::string::npos);
}

// The shared files, against the facts their README states.
Result<Vocab> load_shared(const std::string& relative) {
  Result<GgufFile> file = GgufFile::open(testing::shared_dir() + "/" + relative);
  if (!file.ok()) return file.error();
  return load_vocab(*file);
}

TEST(VocabTest, SharedLlamaSpm) {
  TRELLIS_REQUIRE_SHARED();
  Result<Vocab> vocab = load_shared("tokenizer-vectors/ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(vocab.ok()) << vocab.error().message;
  EXPECT_EQ(vocab->kind, TokenizerKind::SPM);
  EXPECT_EQ(vocab->size(), 32000);
  EXPECT_EQ(vocab->scores.size(), 32000u);
  EXPECT_EQ(vocab->bos_id, 1);
  EXPECT_EQ(vocab->eos_id, 2);
  EXPECT_EQ(vocab->unk_id, 0);
  EXPECT_TRUE(vocab->add_bos);
  EXPECT_FALSE(vocab->add_eos);
  EXPECT_TRUE(vocab->add_space_prefix);
  EXPECT_EQ(std::count(vocab->types.begin(), vocab->types.end(), TokenType::BYTE), 256);
}

TEST(VocabTest, SharedPhi3) {
  TRELLIS_REQUIRE_SHARED();
  Result<Vocab> vocab = load_shared("tokenizer-vectors/ggml-vocab-phi-3.gguf");
  ASSERT_TRUE(vocab.ok()) << vocab.error().message;
  EXPECT_EQ(vocab->size(), 32064);
  EXPECT_EQ(vocab->eos_id, 32000);
  EXPECT_EQ(vocab->pad_id, 32000);
  EXPECT_EQ(std::count(vocab->types.begin(), vocab->types.end(), TokenType::USER_DEFINED), 1);
}

TEST(VocabTest, SharedStories260KHasNoPadding) {
  TRELLIS_REQUIRE_SHARED();
  Result<Vocab> vocab = load_shared("models/stories260K.gguf");
  ASSERT_TRUE(vocab.ok()) << vocab.error().message;
  EXPECT_EQ(vocab->size(), 512);
  EXPECT_EQ(vocab->pad_id, kNoToken);
  EXPECT_EQ(vocab->bos_id, 1);
  EXPECT_TRUE(vocab->add_bos);
  EXPECT_TRUE(vocab->add_space_prefix);
}

TEST(VocabTest, SharedLlamaBpeAndBert) {
  TRELLIS_REQUIRE_SHARED();
  Result<Vocab> llama3 = load_shared("tokenizer-vectors/ggml-vocab-llama-bpe.gguf");
  ASSERT_TRUE(llama3.ok()) << llama3.error().message;
  EXPECT_EQ(llama3->kind, TokenizerKind::BPE);
  EXPECT_EQ(llama3->pre, "llama-bpe");
  EXPECT_EQ(llama3->merges.size(), 280147u);
  EXPECT_EQ(llama3->bos_id, 128000);
  EXPECT_TRUE(llama3->add_bos);

  Result<Vocab> bert = load_shared("tokenizer-vectors/ggml-vocab-bert-bge.gguf");
  ASSERT_TRUE(bert.ok()) << bert.error().message;
  EXPECT_EQ(bert->kind, TokenizerKind::WORDPIECE);
  EXPECT_EQ(bert->size(), 30522);
  EXPECT_EQ(bert->bos_id, 101);  // [CLS]
  EXPECT_EQ(bert->eos_id, 102);  // [SEP]
  EXPECT_EQ(bert->unk_id, 100);
}

}  // namespace
}  // namespace trellis
