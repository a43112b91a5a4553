#include "test_support.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <span>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/model_presets.h"
#include "model/synth_model.h"

namespace trellis::testing {

void add_token(Vocab& vocab, const std::string& text, TokenType type, float score) {
  vocab.tokens.push_back(text);
  vocab.types.push_back(type);
  vocab.scores.push_back(score);
}

Vocab byte_fallback_vocab() {
  Vocab vocab;
  vocab.kind = TokenizerKind::SPM;
  vocab.model = "llama";
  add_token(vocab, "<unk>", TokenType::UNKNOWN);
  add_token(vocab, "<s>", TokenType::CONTROL);
  add_token(vocab, "</s>", TokenType::CONTROL);
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    add_token(vocab, std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", TokenType::BYTE);
  }
  vocab.unk_id = 0;
  vocab.bos_id = 1;
  vocab.eos_id = 2;
  return vocab;
}
namespace fs = std::filesystem;

std::string shared_dir() {
  if (const char* env = std::getenv("TRELLIS_SHARED_DIR")) return env;
  return fs::weakly_canonical(fs::path(TRELLIS_SHARED_DIR)).string();
}

bool have_shared_dir() {
  return fs::is_directory(shared_dir());
}

namespace {
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("trellis-test-" + std::to_string(::getpid()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};
}  // namespace

std::string temp_dir() {
  static TempDir dir;
  return dir.path.string();
}

EngineRequest greedy_request(std::vector<TokenId> prompt, int32_t max_tokens, bool return_logits) {
  EngineRequest r = trellis::greedy_request(std::move(prompt), max_tokens);
  r.return_logits = return_logits;
  return r;
}

namespace {

// Writes the tiny preset (as `arch`, empty: llama) in Q8_0 with `seed` to the temp folder.
std::string synth_tiny(const std::string& name, const std::string& arch, uint64_t seed) {
  const std::string p = temp_dir() + "/" + name;
  ModelPreset preset = *find_model_preset("tiny");
  if (!arch.empty()) {
    const Result<ModelPreset> recast = preset_for_arch(preset, arch);
    EXPECT_TRUE(recast.ok());
    if (recast.ok()) preset = *recast;
  }
  const SynthOptions options{preset, DType::Q8_0, seed, "", p, 2, false};
  const Status status = synthesize_model(options);
  EXPECT_TRUE(status.ok()) << status.error().message;
  return p;
}

}  // namespace

const std::string& tiny_engine_model() {
  static const std::string path = synth_tiny("engine-tiny.gguf", "", 9);
  return path;
}

const std::string& tiny_draft_model() {
  static const std::string path = synth_tiny("engine-tiny-draft.gguf", "", 10);
  return path;
}

const std::string& tiny_gemma3_engine_model() {
  static const std::string path = synth_tiny("engine-tiny-gemma3.gguf", "gemma3", 9);
  return path;
}

const std::string& tiny_moe_engine_model() {
  static const std::string path = synth_tiny("engine-tiny-gpt-oss.gguf", "gpt-oss", 9);
  return path;
}

int scaled_count(int full, int minimum) {
  double scale = 1.0;
  if (const char* env = std::getenv("TRELLIS_TEST_SCALE")) {
    char* end = nullptr;
    const double parsed = std::strtod(env, &end);
    if (end != env && *end == '\0' && parsed > 0.0 && parsed <= 1.0) scale = parsed;
  }
  const int scaled = static_cast<int>(std::ceil(full * scale));
  return std::max(std::min(scaled, full), std::min(minimum, full));
}

void expect_no_leak(Engine& engine) {
  Status ok = engine.check_invariants();
  EXPECT_TRUE(ok.ok()) << (ok.ok() ? "" : ok.error().message);
  EXPECT_EQ(engine.stats().n_blocks_in_use, 0);
  engine.flush_cache();
  EXPECT_EQ(engine.stats().n_blocks_free, engine.stats().n_blocks_total);
}

std::string rewrite_gguf(const std::string& source, const std::string& name, const std::string& key,
                         std::optional<GgufValue> value, const std::string& dropped) {
  Result<GgufFile> in = GgufFile::open(source);
  EXPECT_TRUE(in.ok());
  GgufWriter writer;
  writer.copy_metadata(*in, "");
  if (value) writer.set(key, *value);
  std::vector<const GgufTensor*> kept;
  for (const GgufTensor& t : in->tensors()) {
    if (t.name == dropped) continue;
    EXPECT_TRUE(writer.add_tensor(t.name, t.type, t.shape).ok());
    kept.push_back(&t);
  }
  const std::string path = temp_dir() + "/" + name + ".gguf";
  EXPECT_TRUE(writer.begin(path).ok());
  for (const GgufTensor* t : kept) {
    EXPECT_TRUE(writer
                    .write_tensor_data(std::span<const uint8_t>(
                        static_cast<const uint8_t*>(t->data), static_cast<size_t>(t->n_bytes)))
                    .ok());
  }
  EXPECT_TRUE(writer.finish().ok());
  return path;
}

}  // namespace trellis::testing
