// The family tables (model/family_tensors.h, model/family_keys.h) are what both the loader and
// the synthesizer read: for every family `model synth` writes, the file holds only tensors and
// keys its table lists and every one the table requires; a file with one required tensor or key
// taken out is refused by Model::load / read_model_hparams with an error naming it, and one with
// an optional tensor taken out still loads. Which tensors and keys are optional is written out
// here, not taken from the tables, so a table that marks too much optional fails.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/architecture.h"
#include "model/family_keys.h"
#include "model/family_tensors.h"
#include "model/model.h"
#include "model/model_presets.h"
#include "model/synth_family.h"
#include "model/synth_model.h"
#include "test_support.h"

namespace trellis {
namespace {

// The only tensors a family may lack: the output matrix (tied to the embeddings) and the rope
// factors of the scalings a file may not have.
const std::set<std::string> kOptionalTensors = {
    "output.weight", "rope_freqs.weight", "rope_factors_short.weight", "rope_factors_long.weight"};
// The keys without which no file of any family loads (ARCH.<suffix>), and those a mixture of
// experts needs too.
const std::set<std::string> kRequiredKeySuffixes = {"context_length", "embedding_length",
                                                    "block_count", "feed_forward_length",
                                                    "attention.head_count"};
const std::set<std::string> kRequiredExpertKeySuffixes = {"expert_count", "expert_used_count"};

std::set<std::string> required_key_suffixes(const Architecture& arch) {
  std::set<std::string> out = kRequiredKeySuffixes;
  if (arch.ffn_kind == FfnKind::MOE)
    out.insert(kRequiredExpertKeySuffixes.begin(), kRequiredExpertKeySuffixes.end());
  return out;
}

ModelPreset tiny_as(std::string_view family) {
  Result<ModelPreset> preset = preset_for_arch(*find_model_preset("tiny"), family);
  EXPECT_TRUE(preset.ok()) << preset.error().message;
  return *preset;
}

std::string synth_tiny(std::string_view family) {
  std::string path = testing::temp_dir() + "/family-" + std::string(family) + ".gguf";
  SynthOptions options{tiny_as(family), DType::Q4_0, 5, "", path, 2, false};
  Status status = synthesize_model(options);
  EXPECT_TRUE(status.ok()) << status.error().message;
  return path;
}

// Writes `source` to `path` without the tensor or key named `drop`.
void copy_without(const GgufFile& source, const std::string& drop, const std::string& path) {
  GgufWriter writer;
  for (const GgufKv& kv : source.metadata()) {
    if (kv.key != drop) writer.set(kv.key, kv.value);
  }
  for (const GgufTensor& t : source.tensors()) {
    if (t.name != drop) {
      ASSERT_TRUE(writer.add_tensor(t.name, t.type, t.shape).ok());
    }
  }
  ASSERT_TRUE(writer.begin(path).ok());
  for (const GgufTensor& t : source.tensors()) {
    if (t.name != drop) {
      ASSERT_TRUE(writer.write_tensor_data(t.bytes()).ok());
    }
  }
  ASSERT_TRUE(writer.finish().ok());
}

struct Listed {
  std::vector<int64_t> shape;
  Presence presence;
};

// Every tensor name the table of `arch` lists for a model of hp.n_layer layers.
std::map<std::string, Listed> table_tensors(const Architecture& arch, const ModelHParams& hp) {
  std::map<std::string, Listed> out;
  const FamilyTensors& family = family_tensors(arch);
  auto add = [&](std::string name, const TensorSpec& spec) {
    EXPECT_TRUE(out.emplace(name, Listed{tensor_shape(spec, hp), spec.presence}).second)
        << name << " is listed twice";
  };
  for (const TensorSpec& spec : family.before_layers) add(std::string(spec.name), spec);
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    for (const TensorSpec& spec : family.layer) add(layer_tensor_name(il, spec), spec);
  }
  for (const TensorSpec& spec : family.after_layers) add(std::string(spec.name), spec);
  return out;
}

TEST(FamilyTables, LayerTensorsSayWhereTheLoaderBindsThem) {
  for (const Architecture& arch : architectures()) {
    SCOPED_TRACE(arch.name);
    for (const TensorSpec& spec : family_tensors(arch).layer) {
      const bool matrix = spec.kind == TensorKind::MATRIX || spec.kind == TensorKind::ROUTER;
      const bool experts = spec.kind == TensorKind::EXPERTS;
      EXPECT_EQ(spec.matrix != nullptr, matrix) << spec.name;
      EXPECT_EQ(spec.experts != nullptr, experts) << spec.name;
      EXPECT_EQ(spec.vector != nullptr, !matrix && !experts) << spec.name;
    }
    for (const auto* list :
         {&family_tensors(arch).before_layers, &family_tensors(arch).after_layers}) {
      for (const TensorSpec& spec : *list) {
        EXPECT_TRUE(spec.matrix == nullptr && spec.vector == nullptr && spec.experts == nullptr)
            << spec.name;
      }
    }
  }
}

TEST(FamilyTables, SynthesizedFilesHoldExactlyWhatTheTablesList) {
  for (const SynthFamily& synth : synth_families()) {
    SCOPED_TRACE(synth.name);
    Result<GgufFile> file = GgufFile::open(synth_tiny(synth.name));
    ASSERT_TRUE(file.ok()) << file.error().message;
    Result<ModelHParams> hp = read_model_hparams(*file);
    ASSERT_TRUE(hp.ok()) << hp.error().message;
    const Architecture& arch = *find_architecture(synth.architecture);
    const std::map<std::string, Listed> listed = table_tensors(arch, *hp);
    std::set<std::string> held;
    for (const GgufTensor& t : file->tensors()) {
      held.insert(t.name);
      auto it = listed.find(t.name);
      ASSERT_NE(it, listed.end()) << t.name << " is not in the " << arch.name << " table";
      EXPECT_EQ(t.shape, it->second.shape) << t.name;
    }
    for (const auto& [name, entry] : listed) {
      if (entry.presence == Presence::REQUIRED) {
        EXPECT_TRUE(held.count(name)) << name;
      }
      EXPECT_EQ(entry.presence == Presence::OPTIONAL, kOptionalTensors.count(name) > 0) << name;
    }
    // Keys: every ARCH.* key written is listed, every required one is written.
    std::set<std::string> keys;
    for (const KeySpec& spec : family_keys(arch)) {
      const std::string name = key_name(arch, spec.key);
      EXPECT_TRUE(keys.insert(name).second) << name << " is listed twice";
      const std::string suffix(spec.suffix);
      EXPECT_EQ(spec.presence == Presence::REQUIRED, required_key_suffixes(arch).count(suffix) > 0)
          << name;
      if (spec.presence == Presence::REQUIRED) {
        EXPECT_TRUE(file->has(name)) << name;
      }
    }
    const std::string prefix = std::string(file_architecture(arch)) + ".";
    for (const GgufKv& kv : file->metadata()) {
      if (kv.key.starts_with(prefix)) {
        EXPECT_TRUE(keys.count(kv.key)) << kv.key;
      }
    }
  }
}

TEST(FamilyTables, AFileWithoutARequiredTensorIsRefusedByName) {
  const std::string path = testing::temp_dir() + "/family-dropped.gguf";
  for (const SynthFamily& synth : synth_families()) {
    SCOPED_TRACE(synth.name);
    Result<GgufFile> file = GgufFile::open(synth_tiny(synth.name));
    ASSERT_TRUE(file.ok()) << file.error().message;
    const std::string file_arch(file_architecture(*find_architecture(synth.architecture)));
    const int64_t last = *file->get_int(file_arch + ".block_count") - 1;
    const std::string last_layer = "blk." + std::to_string(last) + ".";
    for (const GgufTensor& t : file->tensors()) {
      // The tensors outside the layers and those of the last layer (the loop must reach it).
      if (t.name.starts_with("blk.") && !t.name.starts_with(last_layer)) continue;
      SCOPED_TRACE(t.name);
      copy_without(*file, t.name, path);
      Result<GgufFile> dropped = GgufFile::open(path);
      ASSERT_TRUE(dropped.ok()) << dropped.error().message;
      Result<std::unique_ptr<Model>> model = Model::load(*dropped);
      if (kOptionalTensors.count(t.name)) {
        EXPECT_TRUE(model.ok()) << model.error().message;
        continue;
      }
      ASSERT_FALSE(model.ok());
      const std::string& message = model.error().message;
      EXPECT_NE(message.find("missing tensor '" + t.name + "'"), std::string::npos) << message;
      EXPECT_NE(message.find("required by the " + std::string(synth.architecture)),
                std::string::npos)
          << message;
    }
  }
}

TEST(FamilyTables, AFileWithoutARequiredKeyIsRefusedByName) {
  const std::string path = testing::temp_dir() + "/family-dropped-key.gguf";
  for (const SynthFamily& synth : synth_families()) {
    SCOPED_TRACE(synth.name);
    Result<GgufFile> file = GgufFile::open(synth_tiny(synth.name));
    ASSERT_TRUE(file.ok()) << file.error().message;
    const Architecture& arch = *find_architecture(synth.architecture);
    for (const std::string& suffix : required_key_suffixes(arch)) {
      const std::string key = std::string(file_architecture(arch)) + "." + suffix;
      SCOPED_TRACE(key);
      ASSERT_TRUE(file->has(key));
      copy_without(*file, key, path);
      Result<GgufFile> dropped = GgufFile::open(path);
      ASSERT_TRUE(dropped.ok()) << dropped.error().message;
      Result<std::unique_ptr<Model>> model = Model::load(*dropped);
      ASSERT_FALSE(model.ok());
      const std::string& message = model.error().message;
      if (arch.name != file_architecture(arch) && suffix == "expert_count") {
        // Without it a Mixtral file reads as a dense llama one, which lacks the dense FFN.
        EXPECT_NE(message.find("missing tensor 'blk.0.ffn_gate.weight' (required by the llama"),
                  std::string::npos)
            << message;
        continue;
      }
      EXPECT_NE(message.find("missing metadata key '" + key + "' (required by the " +
                             std::string(synth.architecture) + " architecture)"),
                std::string::npos)
          << message;
    }
  }
}

TEST(FamilyTables, AWrongShapeIsRefusedByName) {
  // qwen3's q norm is per head: a file whose norm spans the width is refused naming it.
  Result<GgufFile> file = GgufFile::open(synth_tiny("qwen3"));
  ASSERT_TRUE(file.ok()) << file.error().message;
  const std::string path = testing::temp_dir() + "/family-reshaped.gguf";
  const GgufTensor* norm = file->find_tensor("blk.2.attn_q_norm.weight");
  ASSERT_NE(norm, nullptr);
  GgufWriter writer;
  for (const GgufKv& kv : file->metadata()) writer.set(kv.key, kv.value);
  for (const GgufTensor& t : file->tensors()) {
    std::vector<int64_t> shape = &t == norm ? std::vector<int64_t>{t.shape[0] / 2} : t.shape;
    ASSERT_TRUE(writer.add_tensor(t.name, t.type, shape).ok());
  }
  ASSERT_TRUE(writer.begin(path).ok());
  for (const GgufTensor& t : file->tensors()) {
    std::span<const uint8_t> bytes = t.bytes();
    if (&t == norm) bytes = bytes.first(bytes.size() / 2);
    ASSERT_TRUE(writer.write_tensor_data(bytes).ok());
  }
  ASSERT_TRUE(writer.finish().ok());
  Result<GgufFile> reshaped = GgufFile::open(path);
  ASSERT_TRUE(reshaped.ok()) << reshaped.error().message;
  Result<std::unique_ptr<Model>> model = Model::load(*reshaped);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find("tensor 'blk.2.attn_q_norm.weight' has shape [32]"),
            std::string::npos)
      << model.error().message;
}

}  // namespace
}  // namespace trellis
