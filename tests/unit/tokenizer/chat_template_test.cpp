// Chat templates: exact rendered text of every format, detection of a GGUF's Jinja template by its
// markers, every error path, and the BOS contract with the tokenizer.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_value.h"
#include "gguf/gguf_writer.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace trellis {
namespace {

bool mentions(const Error& error, const std::string& text) {
  return error.message.find(text) != std::string::npos;
}

// system + user + assistant + user: the shape of a typical second request of a chat.
const std::vector<ChatMessage> kConversation = {
    {"system", "Be brief."},
    {"user", "Hi!"},
    {"assistant", "Hello."},
    {"user", "Name a color."},
};
const std::vector<ChatMessage> kSingleUser = {{"user", "Hi!"}};

ChatRenderOptions with_generation_prompt(bool add) {
  ChatRenderOptions options;
  options.add_generation_prompt = add;
  return options;
}

std::string render_ok(ChatTemplateKind kind, const std::vector<ChatMessage>& messages,
                      bool add_generation_prompt) {
  Result<std::string> text =
      render_chat(kind, messages, with_generation_prompt(add_generation_prompt));
  EXPECT_TRUE(text.ok()) << text.error().message;
  return text.ok() ? *text : std::string();
}

// ---- names ----

TEST(ChatTemplateTest, NamesRoundTrip) {
  const std::vector<std::string> names = {"llama2", "zephyr", "chatml", "llama3", "mistral"};
  ASSERT_EQ(names.size(), kAllChatTemplateKinds.size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(chat_template_name(kAllChatTemplateKinds[i]), names[i]);
    Result<ChatTemplateKind> kind = parse_chat_template_name(names[i]);
    ASSERT_TRUE(kind.ok()) << kind.error().message;
    EXPECT_EQ(*kind, kAllChatTemplateKinds[i]);
  }
  EXPECT_EQ(*parse_chat_template_name("chatml"), ChatTemplateKind::CHATML);
}

TEST(ChatTemplateTest, UnknownNameListsTheValidOnes) {
  for (const char* name : {"vicuna", "", "ChatML", "llama-3"}) {
    Result<ChatTemplateKind> kind = parse_chat_template_name(name);
    ASSERT_FALSE(kind.ok()) << name;
    // Built with append: `"'" + std::string(name)` trips a false -Wrestrict in g++ 12 at -O2.
    std::string quoted = "'";
    quoted.append(name).append("'");
    EXPECT_TRUE(mentions(kind.error(), quoted)) << kind.error().message;
    EXPECT_TRUE(mentions(kind.error(), "llama2, zephyr, chatml, llama3, mistral"))
        << kind.error().message;
  }
}

TEST(ChatTemplateTest, TextHasBosExactlyForTheFormatsThatWriteIt) {
  EXPECT_TRUE(text_has_bos(ChatTemplateKind::LLAMA2));
  EXPECT_TRUE(text_has_bos(ChatTemplateKind::MISTRAL));
  EXPECT_TRUE(text_has_bos(ChatTemplateKind::LLAMA3));
  EXPECT_FALSE(text_has_bos(ChatTemplateKind::ZEPHYR));
  EXPECT_FALSE(text_has_bos(ChatTemplateKind::CHATML));
  // The flag must agree with the text itself.
  for (ChatTemplateKind kind : kAllChatTemplateKinds) {
    std::string text = render_ok(kind, kSingleUser, true);
    bool starts_with_bos = text.rfind("<s>", 0) == 0 || text.rfind("<|begin_of_text|>", 0) == 0;
    EXPECT_EQ(starts_with_bos, text_has_bos(kind)) << chat_template_name(kind) << ": " << text;
  }
}

// ---- rendering: exact text ----

TEST(ChatTemplateTest, Llama2) {
  const std::string conversation =
      "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi! [/INST] Hello. </s>"
      "<s>[INST] Name a color. [/INST]";
  // The generation prompt is the user turn's closing " [/INST]": the flag changes nothing.
  EXPECT_EQ(render_ok(ChatTemplateKind::LLAMA2, kConversation, true), conversation);
  EXPECT_EQ(render_ok(ChatTemplateKind::LLAMA2, kConversation, false), conversation);
  EXPECT_EQ(render_ok(ChatTemplateKind::LLAMA2, kSingleUser, true), "<s>[INST] Hi! [/INST]");
  EXPECT_EQ(render_ok(ChatTemplateKind::LLAMA2, kSingleUser, false), "<s>[INST] Hi! [/INST]");
}

TEST(ChatTemplateTest, Zephyr) {
  const std::string conversation =
      "<|system|>\nBe brief.</s>\n<|user|>\nHi!</s>\n<|assistant|>\nHello.</s>\n"
      "<|user|>\nName a color.</s>\n";
  EXPECT_EQ(render_ok(ChatTemplateKind::ZEPHYR, kConversation, true),
            conversation + "<|assistant|>\n");
  EXPECT_EQ(render_ok(ChatTemplateKind::ZEPHYR, kConversation, false), conversation);
  EXPECT_EQ(render_ok(ChatTemplateKind::ZEPHYR, kSingleUser, true),
            "<|user|>\nHi!</s>\n<|assistant|>\n");
  EXPECT_EQ(render_ok(ChatTemplateKind::ZEPHYR, kSingleUser, false), "<|user|>\nHi!</s>\n");
}

TEST(ChatTemplateTest, ChatMl) {
  const std::string conversation =
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
      "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nName a color.<|im_end|>\n";
  EXPECT_EQ(render_ok(ChatTemplateKind::CHATML, kConversation, true),
            conversation + "<|im_start|>assistant\n");
  EXPECT_EQ(render_ok(ChatTemplateKind::CHATML, kConversation, false), conversation);
  EXPECT_EQ(render_ok(ChatTemplateKind::CHATML, kSingleUser, true),
            "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render_ok(ChatTemplateKind::CHATML, kSingleUser, false),
            "<|im_start|>user\nHi!<|im_end|>\n");
}

TEST(ChatTemplateTest, Llama3) {
  const std::string conversation =
      "<|begin_of_text|>"
      "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nName a color.<|eot_id|>";
  const std::string prompt = "<|start_header_id|>assistant<|end_header_id|>\n\n";
  EXPECT_EQ(render_ok(ChatTemplateKind::LLAMA3, kConversation, true), conversation + prompt);
  EXPECT_EQ(render_ok(ChatTemplateKind::LLAMA3, kConversation, false), conversation);
  EXPECT_EQ(render_ok(ChatTemplateKind::LLAMA3, kSingleUser, true),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>" + prompt);
  EXPECT_EQ(render_ok(ChatTemplateKind::LLAMA3, kSingleUser, false),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>");
}

TEST(ChatTemplateTest, Mistral) {
  const std::string conversation =
      "<s>[INST] Be brief.\n\nHi! [/INST]Hello.</s>[INST] Name a color. [/INST]";
  EXPECT_EQ(render_ok(ChatTemplateKind::MISTRAL, kConversation, true), conversation);
  EXPECT_EQ(render_ok(ChatTemplateKind::MISTRAL, kConversation, false), conversation);
  EXPECT_EQ(render_ok(ChatTemplateKind::MISTRAL, kSingleUser, true), "<s>[INST] Hi! [/INST]");
  EXPECT_EQ(render_ok(ChatTemplateKind::MISTRAL, kSingleUser, false), "<s>[INST] Hi! [/INST]");
}

TEST(ChatTemplateTest, ConversationEndingWithAnAssistantTurnIsClosed) {
  const std::vector<ChatMessage> messages = {{"user", "Hi!"}, {"assistant", "Hello."}};
  EXPECT_EQ(render_ok(ChatTemplateKind::LLAMA2, messages, false),
            "<s>[INST] Hi! [/INST] Hello. </s>");
  EXPECT_EQ(render_ok(ChatTemplateKind::MISTRAL, messages, false),
            "<s>[INST] Hi! [/INST]Hello.</s>");
}

TEST(ChatTemplateTest, BosAndEosSpellingsComeFromTheOptions) {
  ChatRenderOptions options;
  options.bos_token = "<BOS>";
  options.eos_token = "<|endoftext|>";
  const std::vector<ChatMessage> messages = {{"user", "a"}, {"assistant", "b"}, {"user", "c"}};
  auto render = [&](ChatTemplateKind kind) {
    Result<std::string> text = render_chat(kind, messages, options);
    EXPECT_TRUE(text.ok()) << text.error().message;
    return text.ok() ? *text : std::string();
  };
  EXPECT_EQ(render(ChatTemplateKind::LLAMA2),
            "<BOS>[INST] a [/INST] b <|endoftext|><BOS>[INST] c [/INST]");
  EXPECT_EQ(render(ChatTemplateKind::MISTRAL),
            "<BOS>[INST] a [/INST]b<|endoftext|>[INST] c [/INST]");
  EXPECT_EQ(render(ChatTemplateKind::ZEPHYR),
            "<|user|>\na<|endoftext|>\n<|assistant|>\nb<|endoftext|>\n<|user|>\nc<|endoftext|>\n"
            "<|assistant|>\n");
  EXPECT_EQ(render(ChatTemplateKind::LLAMA3).substr(0, 5), "<BOS>");
  // ChatML writes neither.
  EXPECT_EQ(render(ChatTemplateKind::CHATML).find("<BOS>"), std::string::npos);
  EXPECT_EQ(render(ChatTemplateKind::CHATML).find("<|endoftext|>"), std::string::npos);
}

TEST(ChatTemplateTest, FreeOrderFormatsAcceptAnyRoleSequence) {
  // Only the [INST] formats need alternation; the others render each message on its own.
  const std::vector<ChatMessage> messages = {
      {"user", "a"}, {"user", "b"}, {"system", "c"}, {"assistant", "d"}, {"assistant", "e"}};
  EXPECT_EQ(render_ok(ChatTemplateKind::CHATML, messages, false),
            "<|im_start|>user\na<|im_end|>\n<|im_start|>user\nb<|im_end|>\n"
            "<|im_start|>system\nc<|im_end|>\n<|im_start|>assistant\nd<|im_end|>\n"
            "<|im_start|>assistant\ne<|im_end|>\n");
  EXPECT_EQ(render_ok(ChatTemplateKind::ZEPHYR, {{"system", "s"}}, true),
            "<|system|>\ns</s>\n<|assistant|>\n");
  EXPECT_TRUE(render_chat(ChatTemplateKind::LLAMA3, messages).ok());
}

TEST(ChatTemplateTest, ContentIsInsertedVerbatim) {
  const std::vector<ChatMessage> messages = {{"user", "  two\nlines, {{ not jinja }} "}};
  EXPECT_EQ(render_ok(ChatTemplateKind::CHATML, messages, false),
            "<|im_start|>user\n  two\nlines, {{ not jinja }} <|im_end|>\n");
}

// ---- rendering: errors ----

TEST(ChatTemplateTest, EmptyConversationIsAnError) {
  for (ChatTemplateKind kind : kAllChatTemplateKinds) {
    Result<std::string> text = render_chat(kind, std::vector<ChatMessage>{});
    ASSERT_FALSE(text.ok()) << chat_template_name(kind);
    EXPECT_TRUE(mentions(text.error(), "empty conversation")) << text.error().message;
  }
}

TEST(ChatTemplateTest, UnknownRoleIsNamedWithItsIndex) {
  const std::vector<ChatMessage> messages = {
      {"user", "a"}, {"assistant", "b"}, {"tool", "c"}, {"user", "d"}};
  for (ChatTemplateKind kind : kAllChatTemplateKinds) {
    Result<std::string> text = render_chat(kind, messages);
    ASSERT_FALSE(text.ok()) << chat_template_name(kind);
    EXPECT_TRUE(mentions(text.error(), "chat message 2 has role 'tool'")) << text.error().message;
    EXPECT_TRUE(mentions(text.error(), "system, user and assistant")) << text.error().message;
  }
  // Roles are case-sensitive, as in the OpenAI API.
  const std::vector<ChatMessage> capitalized = {{"User", "a"}};
  EXPECT_FALSE(render_chat(ChatTemplateKind::CHATML, capitalized).ok());
}

TEST(ChatTemplateTest, InstFormatsRequireAlternatingRoles) {
  struct Case {
    std::vector<ChatMessage> messages;
    std::string expected;  // part of the error message
  };
  const std::vector<Case> cases = {
      {{{"user", "a"}, {"user", "b"}}, "chat message 1 has role 'user' where the"},
      {{{"assistant", "a"}}, "chat message 0 has role 'assistant' where the"},
      {{{"system", "s"}, {"assistant", "a"}}, "chat message 1 has role 'assistant'"},
      {{{"user", "a"}, {"assistant", "b"}, {"assistant", "c"}},
       "chat message 2 has role 'assistant'"},
      {{{"user", "a"}, {"system", "s"}}, "chat message 1 has role 'system'"},
      {{{"system", "s"}, {"user", "a"}, {"system", "t"}}, "chat message 2 has role 'system'"},
      {{{"system", "s"}}, "needs a user message after the system message"},
  };
  for (ChatTemplateKind kind : {ChatTemplateKind::MISTRAL, ChatTemplateKind::LLAMA2}) {
    const std::string format(chat_template_name(kind));
    for (const Case& c : cases) {
      Result<std::string> text = render_chat(kind, c.messages);
      ASSERT_FALSE(text.ok()) << format << ": " << c.expected;
      EXPECT_TRUE(mentions(text.error(), c.expected)) << text.error().message;
      EXPECT_TRUE(mentions(text.error(), "the " + format + " chat format")) << text.error().message;
    }
  }
}

// ---- detection ----

// Short templates in the style of the ones models ship (markers as the real ones spell them).
constexpr const char* kChatMlSource =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";
constexpr const char* kLlama3Source =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
    "message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = "
    "bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
constexpr const char* kZephyrSource =
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\\n' + "
    "message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ "
    "'<|system|>\\n' + message['content'] + eos_token }}\n{% elif message['role'] == "
    "'assistant' %}\n{{ '<|assistant|>\\n'  + message['content'] + eos_token }}\n{% endif %}\n"
    "{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n"
    "{% endfor %}";
constexpr const char* kLlama2Source =
    "{% if messages[0]['role'] == 'system' %}{% set system_message = '<<SYS>>\\n' + "
    "messages[0]['content'] + '\\n<</SYS>>\\n\\n' %}{% endif %}{% for message in messages %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + message['content'] + "
    "' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'] + ' ' "
    "+ eos_token }}{% endif %}{% endfor %}";
constexpr const char* kMistralSource =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
    "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}"
    "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ message['content'] + eos_token}}{% endif %}{% endfor %}";
constexpr const char* kGemmaSource =
    "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + message['role'] + '\\n' + "
    "message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}";
constexpr const char* kPhi3Source =
    "{% for message in messages %}{% if message['role'] == 'user' %}{{'<|user|>\\n' + "
    "message['content'] + '<|end|>\\n'}}{% elif message['role'] == 'assistant' %}"
    "{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}{% endif %}{% endfor %}";

void expect_detected(const char* source, ChatTemplateKind expected) {
  Result<ChatTemplateKind> kind = detect_chat_template(source);
  ASSERT_TRUE(kind.ok()) << kind.error().message;
  EXPECT_EQ(chat_template_name(*kind), chat_template_name(expected));
}

TEST(ChatTemplateTest, DetectsEachFormatByItsMarkers) {
  expect_detected(kChatMlSource, ChatTemplateKind::CHATML);
  expect_detected(kLlama3Source, ChatTemplateKind::LLAMA3);
  expect_detected(kZephyrSource, ChatTemplateKind::ZEPHYR);
  expect_detected(kLlama2Source, ChatTemplateKind::LLAMA2);
  expect_detected(kMistralSource, ChatTemplateKind::MISTRAL);
}

TEST(ChatTemplateTest, DetectionOrderDecidesOverlappingMarkers) {
  // A ChatML template that also handles [INST]-style input is still ChatML.
  expect_detected("{# legacy: [INST] <<SYS>> #}<|im_start|>", ChatTemplateKind::CHATML);
  expect_detected("[INST] <|start_header_id|>", ChatTemplateKind::LLAMA3);
  // Zephyr needs both role headers.
  Result<ChatTemplateKind> only_user = detect_chat_template("{{ '<|user|>\\n' }}");
  EXPECT_FALSE(only_user.ok());
}

TEST(ChatTemplateTest, UnknownOrEmptyTemplateSuggestsTheOverride) {
  for (const char* source : {kGemmaSource, "", "  \n\t", "{{ messages }}"}) {
    Result<ChatTemplateKind> kind = detect_chat_template(source);
    ASSERT_FALSE(kind.ok()) << source;
    EXPECT_TRUE(mentions(kind.error(), "--chat-template NAME")) << kind.error().message;
    EXPECT_TRUE(mentions(kind.error(), "llama2, zephyr, chatml, llama3, mistral"))
        << kind.error().message;
  }
  EXPECT_TRUE(mentions(detect_chat_template("").error(), "empty"));
  EXPECT_TRUE(mentions(detect_chat_template(kGemmaSource).error(), "not one of the known"));
}

TEST(ChatTemplateTest, Phi3IsNotMistakenForZephyr) {
  Result<ChatTemplateKind> kind = detect_chat_template(kPhi3Source);
  ASSERT_FALSE(kind.ok());
  EXPECT_TRUE(mentions(kind.error(), "Phi-3")) << kind.error().message;
  EXPECT_TRUE(mentions(kind.error(), "--chat-template NAME")) << kind.error().message;
}

// ---- detection from a GGUF file ----

// Writes a tensorless GGUF with the given metadata and opens it.
Result<GgufFile> gguf_with(const std::string& name, const std::vector<GgufKv>& kvs) {
  GgufWriter writer;
  writer.set("general.architecture", GgufValue{std::string("llama")});
  for (const GgufKv& kv : kvs) writer.set(kv.key, kv.value);
  const std::string path = testing::temp_dir() + "/" + name;
  TRELLIS_TRY(writer.begin(path));
  TRELLIS_TRY(writer.finish());
  return GgufFile::open(path);
}

TEST(ChatTemplateTest, DetectsTheTemplateStoredInAGgufFile) {
  Result<GgufFile> file = gguf_with(
      "chatml.gguf", {{std::string(kChatTemplateKey), GgufValue{std::string(kChatMlSource)}}});
  ASSERT_TRUE(file.ok()) << file.error().message;
  Result<ChatTemplateKind> kind = detect_chat_template(*file);
  ASSERT_TRUE(kind.ok()) << kind.error().message;
  EXPECT_EQ(*kind, ChatTemplateKind::CHATML);
}

TEST(ChatTemplateTest, GgufWithoutTemplateIsAnError) {
  Result<GgufFile> file = gguf_with("none.gguf", {});
  ASSERT_TRUE(file.ok()) << file.error().message;
  Result<ChatTemplateKind> kind = detect_chat_template(*file);
  ASSERT_FALSE(kind.ok());
  EXPECT_TRUE(mentions(kind.error(), "none.gguf")) << kind.error().message;
  EXPECT_TRUE(mentions(kind.error(), "no tokenizer.chat_template key")) << kind.error().message;
  EXPECT_TRUE(mentions(kind.error(), "--chat-template NAME")) << kind.error().message;
}

TEST(ChatTemplateTest, GgufWithBadTemplateIsAnError) {
  Result<GgufFile> wrong_type =
      gguf_with("int.gguf", {{std::string(kChatTemplateKey), GgufValue{uint32_t{7}}}});
  ASSERT_TRUE(wrong_type.ok()) << wrong_type.error().message;
  Result<ChatTemplateKind> kind = detect_chat_template(*wrong_type);
  ASSERT_FALSE(kind.ok());
  EXPECT_TRUE(mentions(kind.error(), "tokenizer.chat_template")) << kind.error().message;

  Result<GgufFile> gemma = gguf_with(
      "gemma.gguf", {{std::string(kChatTemplateKey), GgufValue{std::string(kGemmaSource)}}});
  ASSERT_TRUE(gemma.ok()) << gemma.error().message;
  kind = detect_chat_template(*gemma);
  ASSERT_FALSE(kind.ok());
  EXPECT_TRUE(mentions(kind.error(),
                       "gemma.gguf: tokenizer.chat_template: the chat template is "
                       "not one of the known formats"))
      << kind.error().message;
}

// The shared models carry no chat template (see shared/models/README.md): a server must be told.
TEST(ChatTemplateTest, SharedModelsHaveNoTemplate) {
  TRELLIS_REQUIRE_SHARED();
  for (const char* name : {"stories260K.gguf", "llama-2-tiny-random.gguf"}) {
    Result<GgufFile> file = GgufFile::open(testing::shared_dir() + "/models/" + name);
    ASSERT_TRUE(file.ok()) << file.error().message;
    Result<ChatTemplateKind> kind = detect_chat_template(*file);
    ASSERT_FALSE(kind.ok()) << name;
    EXPECT_TRUE(mentions(kind.error(), "no tokenizer.chat_template key")) << kind.error().message;
  }
}

// ---- the BOS contract with the tokenizer ----

size_t count(const std::vector<TokenId>& ids, TokenId id) {
  return static_cast<size_t>(std::count(ids.begin(), ids.end(), id));
}

// <unk> 0, <s> 1, </s> 2 (CONTROL), then the 256 byte tokens: every text can be encoded.
std::unique_ptr<Tokenizer> byte_tokenizer() {
  Vocab vocab;
  vocab.kind = TokenizerKind::SPM;
  vocab.model = "llama";
  auto add = [&vocab](const std::string& text, TokenType type) {
    vocab.tokens.push_back(text);
    vocab.types.push_back(type);
    vocab.scores.push_back(0.0f);
  };
  add("<unk>", TokenType::UNKNOWN);
  add("<s>", TokenType::CONTROL);
  add("</s>", TokenType::CONTROL);
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    add(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", TokenType::BYTE);
  }
  vocab.unk_id = 0;
  vocab.bos_id = 1;
  vocab.eos_id = 2;
  vocab.add_bos = true;
  vocab.add_space_prefix = true;
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::create(std::move(vocab));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  return tokenizer.ok() ? std::move(*tokenizer) : nullptr;
}

// Tokenized as the header says (parse_special, add_special only when !text_has_bos), the rendered
// text has one BOS per [INST] turn in LLAMA2, and exactly one in MISTRAL and ZEPHYR.
void expect_bos_contract(const Tokenizer& tokenizer) {
  const TokenId bos = tokenizer.vocab().bos_id;
  const TokenId eos = tokenizer.vocab().eos_id;
  struct Case {
    ChatTemplateKind kind;
    size_t n_bos;
    size_t n_eos;
  };
  for (const Case& c : {Case{ChatTemplateKind::LLAMA2, 2, 1}, Case{ChatTemplateKind::MISTRAL, 1, 1},
                        Case{ChatTemplateKind::ZEPHYR, 1, 4}}) {
    std::string text = render_ok(c.kind, kConversation, true);
    std::vector<TokenId> ids =
        tokenizer.encode(text, /*add_special=*/!text_has_bos(c.kind), /*parse_special=*/true);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids[0], bos) << chat_template_name(c.kind);
    EXPECT_EQ(count(ids, bos), c.n_bos) << chat_template_name(c.kind);
    EXPECT_EQ(count(ids, eos), c.n_eos) << chat_template_name(c.kind);
    if (text_has_bos(c.kind)) {
      // What the flag prevents: letting the vocab add BOS too gives two in a row.
      std::vector<TokenId> doubled = tokenizer.encode(text, true, true);
      ASSERT_GE(doubled.size(), 2u);
      EXPECT_EQ(doubled[0], bos);
      EXPECT_EQ(doubled[1], bos);
    }
  }
}

TEST(ChatTemplateTest, RenderedTextTokenizesWithOneBosPerFormatRule) {
  std::unique_ptr<Tokenizer> tokenizer = byte_tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  expect_bos_contract(*tokenizer);
}

TEST(ChatTemplateTest, RenderedTextTokenizesWithTheRealLlama2Vocab) {
  TRELLIS_REQUIRE_SHARED();
  Result<GgufFile> file =
      GgufFile::open(testing::shared_dir() + "/models/llama-2-tiny-random.gguf");
  ASSERT_TRUE(file.ok()) << file.error().message;
  Result<Vocab> vocab = load_vocab(*file);
  ASSERT_TRUE(vocab.ok()) << vocab.error().message;
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::create(std::move(*vocab));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  expect_bos_contract(**tokenizer);
}

}  // namespace
}  // namespace trellis
