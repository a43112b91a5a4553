// Synthesized models carry the chat template of their real models' format, and chat works on the
// synthesized vocab in that format.
#include "model/preset_chat_templates.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/model_presets.h"
#include "model/synth_model.h"
#include "test_support.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace trellis {
namespace {

TEST(PresetChatTemplates, EveryTemplateIsDetectedAsItsOwnFormat) {
  for (ChatTemplateKind kind : kAllChatTemplateKinds) {
    Result<ChatTemplateKind> detected = detect_chat_template(chat_template_source(kind));
    ASSERT_TRUE(detected.ok()) << chat_template_name(kind) << ": " << detected.error().message;
    EXPECT_EQ(*detected, kind) << chat_template_name(kind) << " was detected as "
                               << chat_template_name(*detected);
  }
}

TEST(PresetChatTemplates, EachPresetHasItsRealModelsFormat) {
  const std::map<std::string, ChatTemplateKind> expected = {
      {"tiny", ChatTemplateKind::ZEPHYR},
      {"small", ChatTemplateKind::ZEPHYR},
      {"tinyllama-1.1b", ChatTemplateKind::ZEPHYR},
      {"llama-3.2-1b", ChatTemplateKind::LLAMA3},
      {"qwen2.5-0.5b", ChatTemplateKind::CHATML},
      {"qwen3-0.6b", ChatTemplateKind::QWEN3},
      {"gemma-3-1b", ChatTemplateKind::GEMMA},
      {"phi-3.5-mini", ChatTemplateKind::PHI3},
      {"tiny-wide", ChatTemplateKind::ZEPHYR},
      {"qwen3-30b-a3b", ChatTemplateKind::QWEN3},
      {"qwen1.5-moe-a2.7b", ChatTemplateKind::CHATML},
      {"olmoe-1b-7b", ChatTemplateKind::CHATML},
      {"mixtral-8x7b", ChatTemplateKind::MISTRAL},
      {"gpt-oss-20b", ChatTemplateKind::HARMONY},
  };
  for (const ModelPreset& preset : model_presets()) {
    auto it = expected.find(preset.name);
    ASSERT_NE(it, expected.end()) << "a new preset: add its chat format here: " << preset.name;
    EXPECT_EQ(preset_chat_format(preset), it->second) << preset.name;
    Result<ChatTemplateKind> detected = detect_chat_template(preset_chat_template(preset));
    ASSERT_TRUE(detected.ok()) << preset.name;
    EXPECT_EQ(*detected, it->second) << preset.name;
  }
}

TEST(PresetChatTemplates, ARecastPresetTakesItsNewFamilysFormat) {
  const std::map<std::string, ChatTemplateKind> expected = {
      {"llama", ChatTemplateKind::ZEPHYR},    {"llama3", ChatTemplateKind::LLAMA3},
      {"qwen2", ChatTemplateKind::CHATML},    {"qwen3", ChatTemplateKind::QWEN3},
      {"gemma3", ChatTemplateKind::GEMMA},    {"phi3", ChatTemplateKind::PHI3},
      {"qwen3moe", ChatTemplateKind::QWEN3},  {"qwen2moe", ChatTemplateKind::CHATML},
      {"olmoe", ChatTemplateKind::CHATML},    {"mixtral", ChatTemplateKind::MISTRAL},
      {"gpt-oss", ChatTemplateKind::HARMONY},
  };
  for (std::string_view arch : synth_arch_names()) {
    Result<ModelPreset> recast = preset_for_arch(*find_model_preset("phi-3.5-mini"), arch);
    ASSERT_TRUE(recast.ok()) << arch;
    EXPECT_EQ(preset_chat_format(*recast), expected.at(std::string(arch))) << arch;
  }
}

std::string synth_tiny(const std::string& name, std::string_view arch, bool chat_template) {
  Result<ModelPreset> preset = preset_for_arch(*find_model_preset("tiny"), arch);
  EXPECT_TRUE(preset.ok());
  const std::string path = testing::temp_dir() + "/" + name;
  SynthOptions options{*preset, DType::Q8_0, 3, "", path, 2, false};
  options.chat_template = chat_template;
  const Status status = synthesize_model(options);
  EXPECT_TRUE(status.ok()) << status.error().message;
  return path;
}

TEST(PresetChatTemplates, TheSynthesizerWritesThePresetsTemplate) {
  for (std::string_view arch : {"llama", "qwen3"}) {
    Result<GgufFile> file =
        GgufFile::open(synth_tiny("chat-" + std::string(arch) + ".gguf", arch, true));
    ASSERT_TRUE(file.ok()) << file.error().message;
    Result<std::string> source = file->get_string(std::string(kChatTemplateKey));
    ASSERT_TRUE(source.ok()) << arch;
    Result<ChatTemplateKind> kind = detect_chat_template(*file);
    ASSERT_TRUE(kind.ok()) << kind.error().message;
    EXPECT_EQ(*kind, arch == "llama" ? ChatTemplateKind::ZEPHYR : ChatTemplateKind::QWEN3);
  }
  Result<GgufFile> bare = GgufFile::open(synth_tiny("chat-none.gguf", "llama", false));
  ASSERT_TRUE(bare.ok());
  EXPECT_FALSE(bare->has(kChatTemplateKey));
}

// The synthesized vocab has no tokens for the role headers (nor has TinyLlama's: Zephyr's headers
// are plain text to it); they tokenize as text, and turns end with the vocab's EOS, which it has.
TEST(PresetChatTemplates, ZephyrChatEncodesOnTheSynthesizedVocab) {
  Result<GgufFile> file = GgufFile::open(synth_tiny("chat-zephyr.gguf", "llama", true));
  ASSERT_TRUE(file.ok());
  Result<Vocab> vocab = load_vocab(*file);
  ASSERT_TRUE(vocab.ok()) << vocab.error().message;
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::create(std::move(vocab).value());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  const Tokenizer& tok = **tokenizer;
  const std::vector<ChatMessage> chat = {
      {"system", "Be brief."}, {"user", "Hello"}, {"assistant", "Hi"}, {"user", "Bye </s>"}};
  Result<std::vector<TokenId>> tokens = encode_chat(tok, ChatTemplateKind::ZEPHYR, chat);
  ASSERT_TRUE(tokens.ok()) << tokens.error().message;
  EXPECT_EQ(tokens->front(), tok.vocab().bos_id);
  // Each of the four turns ends with EOS; the "</s>" a user typed stays text.
  EXPECT_EQ(std::count(tokens->begin(), tokens->end(), tok.vocab().eos_id), 4);
  std::string text;
  for (TokenId id : *tokens) text += tok.token_to_piece(id, /*render_special=*/true);
  EXPECT_NE(text.find("<|assistant|>\n"), std::string::npos) << text;
  EXPECT_TRUE(text.ends_with("<|assistant|>\n")) << text;
  EXPECT_NE(text.find("Bye </s></s>"), std::string::npos) << text;
}

}  // namespace
}  // namespace trellis
