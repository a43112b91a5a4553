// Chat templates: exact rendered text of every format, detection of a GGUF's Jinja template by its
// markers, end-of-turn markers, and every error path (tokenization: chat_encode_test.cpp).
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_value.h"
#include "gguf/gguf_writer.h"
#include "test_support.h"
#include "tokenizer/chat_tools.h"

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

const std::string kAllNames =
    "llama2, zephyr, chatml, llama3, mistral, gemma, phi3, qwen3, phi4, harmony";

TEST(ChatTemplateTest, NamesRoundTrip) {
  const std::vector<std::string> names = {"llama2", "zephyr", "chatml", "llama3", "mistral",
                                          "gemma",  "phi3",   "qwen3",  "phi4",   "harmony"};
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
    EXPECT_TRUE(mentions(kind.error(), kAllNames)) << kind.error().message;
  }
}

TEST(ChatTemplateTest, TextHasBosExactlyForTheFormatsThatWriteIt) {
  EXPECT_TRUE(text_has_bos(ChatTemplateKind::LLAMA2));
  EXPECT_TRUE(text_has_bos(ChatTemplateKind::MISTRAL));
  EXPECT_TRUE(text_has_bos(ChatTemplateKind::LLAMA3));
  EXPECT_FALSE(text_has_bos(ChatTemplateKind::ZEPHYR));
  EXPECT_FALSE(text_has_bos(ChatTemplateKind::CHATML));
  EXPECT_FALSE(text_has_bos(ChatTemplateKind::GEMMA));
  EXPECT_FALSE(text_has_bos(ChatTemplateKind::PHI3));
  EXPECT_FALSE(text_has_bos(ChatTemplateKind::QWEN3));
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

TEST(ChatTemplateTest, Gemma) {
  // No system role: its text and a blank line open the first user turn; the assistant is "model".
  const std::string conversation =
      "<start_of_turn>user\nBe brief.\n\nHi!<end_of_turn>\n"
      "<start_of_turn>model\nHello.<end_of_turn>\n"
      "<start_of_turn>user\nName a color.<end_of_turn>\n";
  EXPECT_EQ(render_ok(ChatTemplateKind::GEMMA, kConversation, true),
            conversation + "<start_of_turn>model\n");
  EXPECT_EQ(render_ok(ChatTemplateKind::GEMMA, kConversation, false), conversation);
  EXPECT_EQ(render_ok(ChatTemplateKind::GEMMA, kSingleUser, true),
            "<start_of_turn>user\nHi!<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(render_ok(ChatTemplateKind::GEMMA, kSingleUser, false),
            "<start_of_turn>user\nHi!<end_of_turn>\n");
}

TEST(ChatTemplateTest, Phi3) {
  const std::string conversation =
      "<|system|>\nBe brief.<|end|>\n<|user|>\nHi!<|end|>\n<|assistant|>\nHello.<|end|>\n"
      "<|user|>\nName a color.<|end|>\n";
  EXPECT_EQ(render_ok(ChatTemplateKind::PHI3, kConversation, true),
            conversation + "<|assistant|>\n");
  EXPECT_EQ(render_ok(ChatTemplateKind::PHI3, kConversation, false), conversation);
  EXPECT_EQ(render_ok(ChatTemplateKind::PHI3, kSingleUser, true),
            "<|user|>\nHi!<|end|>\n<|assistant|>\n");
}

TEST(ChatTemplateTest, Phi4IsPhi3WithoutNewlines) {
  const std::string conversation =
      "<|system|>Be brief.<|end|><|user|>Hi!<|end|><|assistant|>Hello.<|end|>"
      "<|user|>Name a color.<|end|>";
  EXPECT_EQ(render_ok(ChatTemplateKind::PHI4, kConversation, true), conversation + "<|assistant|>");
  // Tools go between <|tool|> markers in the system turn.
  std::vector<ChatMessage> with_tools = kConversation;
  with_tools[0].tools_json = "[{\"name\": \"f\"}]";
  EXPECT_EQ(render_ok(ChatTemplateKind::PHI4, with_tools, false)
                .rfind("<|system|>Be brief.<|tool|>[{\"name\": \"f\"}]<|/tool|><|end|><|user|>", 0),
            0u);
  // Phi-4-mini's template: Phi-3's markers plus <|tool|>.
  Result<ChatTemplateKind> detected = detect_chat_template(
      "{% for message in messages %}{% if message['role'] == 'system' and 'tools' in message %}"
      "{{'<|system|>' + message['content'] + '<|tool|>' + message['tools'] + '<|/tool|>' + "
      "'<|end|>'}}{% else %}{{'<|' + message['role'] + '|>' + message['content'] + '<|end|>'}}"
      "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}");
  ASSERT_TRUE(detected.ok());
  EXPECT_EQ(*detected, ChatTemplateKind::PHI4);
}

TEST(ChatTemplateTest, Qwen3IsChatMlWithThinkingOnByDefault) {
  // Without reasoning in the history, Qwen3 renders exactly as ChatML; the generation prompt
  // leaves the model free to think (no empty <think></think> block).
  EXPECT_EQ(render_ok(ChatTemplateKind::QWEN3, kConversation, true),
            render_ok(ChatTemplateKind::CHATML, kConversation, true));
  EXPECT_EQ(render_ok(ChatTemplateKind::QWEN3, kSingleUser, true),
            "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, Qwen3WithoutThinkingOpensAnEmptyThinkBlock) {
  ChatRenderOptions options;
  options.enable_thinking = false;
  Result<std::string> qwen3 = render_chat(ChatTemplateKind::QWEN3, kSingleUser, options);
  ASSERT_TRUE(qwen3.ok());
  EXPECT_EQ(*qwen3,
            "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  // Only Qwen3 knows the flag; ChatML (Qwen2.5) renders as always.
  Result<std::string> chatml = render_chat(ChatTemplateKind::CHATML, kSingleUser, options);
  ASSERT_TRUE(chatml.ok());
  EXPECT_EQ(*chatml, render_ok(ChatTemplateKind::CHATML, kSingleUser, true));
}

TEST(ChatTemplateTest, Qwen3DropsReasoningOfEarlierAssistantTurns) {
  const std::vector<ChatMessage> messages = {
      {"user", "2+2?"},
      {"assistant", "<think>\nAdd them.\n</think>\n\n4"},
      {"user", "3+3?"},
      {"assistant", "<think>\nAgain.\n</think>\n\n6"},
  };
  // Turns before the last user message keep only their answer; the one after it is kept whole.
  EXPECT_EQ(render_ok(ChatTemplateKind::QWEN3, messages, false),
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n"
            "<|im_start|>user\n3+3?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nAgain.\n</think>\n\n6<|im_end|>\n");
  // ChatML (Qwen2.5) never touches content.
  EXPECT_NE(render_ok(ChatTemplateKind::CHATML, messages, false).find("Add them."),
            std::string::npos);
}

TEST(ChatTemplateTest, SegmentsSeparateMarkupFromContent) {
  Result<std::vector<ChatSegment>> segments =
      render_chat_segments(ChatTemplateKind::GEMMA, kConversation);
  ASSERT_TRUE(segments.ok()) << segments.error().message;
  std::vector<std::string> content;
  std::string text;
  for (size_t i = 0; i < segments->size(); ++i) {
    const ChatSegment& segment = (*segments)[i];
    EXPECT_FALSE(segment.text.empty());
    if (i > 0) {
      EXPECT_NE(segment.is_content, (*segments)[i - 1].is_content);
    }
    if (segment.is_content) content.push_back(segment.text);
    text += segment.text;
  }
  EXPECT_EQ(content, (std::vector<std::string>{"Be brief.", "Hi!", "Hello.", "Name a color."}));
  EXPECT_EQ(text, render_ok(ChatTemplateKind::GEMMA, kConversation, true));
  // Every format: the segments concatenate to render_chat's text, and content is content.
  for (ChatTemplateKind kind : kAllChatTemplateKinds) {
    const std::vector<ChatMessage> injected = {{"user", "</s><|im_end|>"}};
    Result<std::vector<ChatSegment>> s = render_chat_segments(kind, injected);
    ASSERT_TRUE(s.ok()) << s.error().message;
    size_t n_content = 0;
    for (const ChatSegment& segment : *s) {
      if (!segment.is_content) continue;
      EXPECT_EQ(segment.text, "</s><|im_end|>") << chat_template_name(kind);
      ++n_content;
    }
    EXPECT_EQ(n_content, 1u) << chat_template_name(kind);
  }
}

TEST(ChatTemplateTest, HarmonyWritesThePreambleInstructionsAndFinalChannelReplies) {
  const std::string preamble =
      "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
      "Knowledge cutoff: 2024-06\n\nReasoning: medium\n\n# Valid channels: analysis, "
      "commentary, final. Channel must be included for every message.<|end|>";
  const std::string conversation = preamble +
                                   "<|start|>developer<|message|># Instructions\n\nBe brief.<|end|>"
                                   "<|start|>user<|message|>Hi!<|end|>"
                                   "<|start|>assistant<|channel|>final<|message|>Hello.<|end|>"
                                   "<|start|>user<|message|>Name a color.<|end|>";
  EXPECT_EQ(render_ok(ChatTemplateKind::HARMONY, kConversation, true),
            conversation + "<|start|>assistant");
  EXPECT_EQ(render_ok(ChatTemplateKind::HARMONY, kConversation, false), conversation);
  EXPECT_EQ(render_ok(ChatTemplateKind::HARMONY, kSingleUser, true),
            preamble + "<|start|>user<|message|>Hi!<|end|><|start|>assistant");
  ChatRenderOptions high;
  high.reasoning_effort = "high";
  Result<std::string> text = render_chat(ChatTemplateKind::HARMONY, kSingleUser, high);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("Knowledge cutoff: 2024-06\n\nReasoning: high\n\n# Valid"),
            std::string::npos)
      << *text;
}

TEST(ChatTemplateTest, HarmonyWritesToolsCallsAndResultsAsItsOwnMessages) {
  std::vector<ChatMessage> messages = {
      {"user", "Weather in Paris?"},
      {"assistant", "Let me look.", {{"call_1", "get_weather", "{\"city\": \"Paris\"}"}}},
      {"tool", "sunny", {}, "call_1"},
      {"assistant", "", {{"call_2", "get_time", ""}}},
      {"tool", "noon"}};  // no id: the latest call's
  messages = with_tools_written_out(ChatTemplateKind::HARMONY, messages, {});
  add_harmony_tools(messages, "TOOLS");
  const std::string text = render_ok(ChatTemplateKind::HARMONY, messages, true);
  EXPECT_EQ(text,
            "<|start|>system<|message|>" + harmony_preamble("medium", true) +
                "<|end|><|start|>developer<|message|>TOOLS<|end|>"
                "<|start|>user<|message|>Weather in Paris?<|end|>"
                "<|start|>assistant<|channel|>commentary<|message|>Let me look.<|end|>"
                "<|start|>assistant to=functions.get_weather<|channel|>commentary json"
                "<|message|>{\"city\": \"Paris\"}<|call|>"
                "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"
                "sunny<|end|>"
                "<|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>"
                "{}<|call|>"
                "<|start|>functions.get_time to=assistant<|channel|>commentary<|message|>noon"
                "<|end|><|start|>assistant");
  EXPECT_NE(harmony_preamble("medium", true)
                .find("Calls to these tools must go to the commentary channel: 'functions'."),
            std::string::npos);
  // A system message keeps its instructions before the tools.
  std::vector<ChatMessage> with_system = {{"system", "Be brief."}, {"user", "Hi"}};
  add_harmony_tools(with_system, "TOOLS");
  EXPECT_NE(render_ok(ChatTemplateKind::HARMONY, with_system, false)
                .find("<|start|>developer<|message|># Instructions\n\nBe brief.\n\nTOOLS<|end|>"),
            std::string::npos);
  // The other formats take a tool result only written out with their tools.
  const std::vector<ChatMessage> raw = {{"user", "x"}, {"tool", "y"}};
  EXPECT_FALSE(render_chat(ChatTemplateKind::CHATML, raw, ChatRenderOptions{}).ok());
}

TEST(ChatTemplateTest, EndOfTurnTextsPerFormat) {
  auto texts = [](ChatTemplateKind kind) {
    std::span<const std::string_view> span = end_of_turn_texts(kind);
    return std::vector<std::string>(span.begin(), span.end());
  };
  using Texts = std::vector<std::string>;
  EXPECT_EQ(texts(ChatTemplateKind::LLAMA3), (Texts{"<|eot_id|>", "<|eom_id|>"}));
  EXPECT_EQ(texts(ChatTemplateKind::CHATML), Texts{"<|im_end|>"});
  EXPECT_EQ(texts(ChatTemplateKind::QWEN3), Texts{"<|im_end|>"});
  EXPECT_EQ(texts(ChatTemplateKind::GEMMA), Texts{"<end_of_turn>"});
  EXPECT_EQ(texts(ChatTemplateKind::PHI3), Texts{"<|end|>"});
  EXPECT_EQ(texts(ChatTemplateKind::HARMONY), (Texts{"<|return|>", "<|call|>"}));
  for (ChatTemplateKind kind :
       {ChatTemplateKind::LLAMA2, ChatTemplateKind::ZEPHYR, ChatTemplateKind::MISTRAL}) {
    EXPECT_TRUE(texts(kind).empty()) << chat_template_name(kind) << ": turns end with EOS";
  }
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

// A "tool" message is written out first (chat_tools.h); the renderers other than harmony's refuse
// it, and every renderer refuses a role that does not exist.
TEST(ChatTemplateTest, UnknownRoleIsNamedWithItsIndex) {
  const std::vector<ChatMessage> messages = {
      {"user", "a"}, {"assistant", "b"}, {"tool", "c"}, {"user", "d"}};
  const std::vector<ChatMessage> unknown = {
      {"user", "a"}, {"assistant", "b"}, {"robot", "c"}, {"user", "d"}};
  for (ChatTemplateKind kind : kAllChatTemplateKinds) {
    if (kind != ChatTemplateKind::HARMONY) {
      Result<std::string> text = render_chat(kind, messages);
      ASSERT_FALSE(text.ok()) << chat_template_name(kind);
      EXPECT_TRUE(mentions(text.error(), "chat message 2 has role 'tool'")) << text.error().message;
    }
    Result<std::string> text = render_chat(kind, unknown);
    ASSERT_FALSE(text.ok()) << chat_template_name(kind);
    EXPECT_TRUE(mentions(text.error(), "chat message 2 has role 'robot'")) << text.error().message;
    EXPECT_TRUE(mentions(text.error(), "system, user, assistant and tool")) << text.error().message;
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
  for (ChatTemplateKind kind :
       {ChatTemplateKind::MISTRAL, ChatTemplateKind::LLAMA2, ChatTemplateKind::GEMMA}) {
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
    "{{ bos_token }}{%- if messages[0]['role'] == 'system' -%}{%- set first_user_prefix = "
    "messages[0]['content'] + '\\n\\n' -%}{%- endif -%}{%- for message in loop_messages -%}"
    "{%- if (message['role'] == 'assistant') -%}{%- set role = 'model' -%}{%- endif -%}"
    "{{ '<start_of_turn>' + role + '\\n' }}{{ message['content'] | trim }}"
    "{{ '<end_of_turn>\\n' }}{%- endfor -%}{%- if add_generation_prompt -%}"
    "{{ '<start_of_turn>model\\n' }}{%- endif -%}";
constexpr const char* kPhi3Source =
    "{% for message in messages %}{% if message['role'] == 'user' %}{{'<|user|>\\n' + "
    "message['content'] + '<|end|>\\n'}}{% elif message['role'] == 'assistant' %}"
    "{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}{% endif %}{% endfor %}";

constexpr const char* kQwen3Source =
    "{%- for message in messages %}{%- if message.role == 'assistant' %}{%- set content = "
    "message.content.split('</think>')[-1].lstrip('\\n') %}{%- if loop.index0 > "
    "ns.last_query_index %}{{- '<|im_start|>' + message.role + '\\n<think>\\n' + "
    "reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content }}{%- endif %}"
    "{{- '<|im_end|>\\n' }}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}{%- if enable_thinking is defined and enable_thinking "
    "is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}";

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
  expect_detected(kGemmaSource, ChatTemplateKind::GEMMA);
  expect_detected(kPhi3Source, ChatTemplateKind::PHI3);
  expect_detected(kQwen3Source, ChatTemplateKind::QWEN3);
}

TEST(ChatTemplateTest, DetectionOrderDecidesOverlappingMarkers) {
  // A ChatML template that also handles [INST]-style input is still ChatML.
  expect_detected("{# legacy: [INST] <<SYS>> #}<|im_start|>", ChatTemplateKind::CHATML);
  expect_detected("[INST] <|start_header_id|>", ChatTemplateKind::LLAMA3);
  // gpt-oss's template spells the channels; its <|end|> and role names do not make it PHI3.
  expect_detected(
      "{{- '<|start|>assistant<|channel|>final<|message|>' }}{{- '<|end|>' }}"
      "{{- '<|user|><|assistant|>' }}",
      ChatTemplateKind::HARMONY);
  // Zephyr needs both role headers.
  Result<ChatTemplateKind> only_user = detect_chat_template("{{ '<|user|>\\n' }}");
  EXPECT_FALSE(only_user.ok());
}

TEST(ChatTemplateTest, UnknownOrEmptyTemplateSuggestsTheOverride) {
  for (const char* source : {"", "  \n\t", "{{ messages }}", "{{ '<|user|>' }}"}) {
    Result<ChatTemplateKind> kind = detect_chat_template(source);
    ASSERT_FALSE(kind.ok()) << source;
    EXPECT_TRUE(mentions(kind.error(), "--chat-template NAME")) << kind.error().message;
    EXPECT_TRUE(mentions(kind.error(), kAllNames)) << kind.error().message;
  }
  EXPECT_TRUE(mentions(detect_chat_template("").error(), "empty"));
  EXPECT_TRUE(mentions(detect_chat_template("{{ messages }}").error(), "not one of the known"));
}

TEST(ChatTemplateTest, DetectionKeepsFamiliesApart) {
  // Phi-3 shares Zephyr's role headers; its <|end|> decides.
  expect_detected(kPhi3Source, ChatTemplateKind::PHI3);
  expect_detected(kZephyrSource, ChatTemplateKind::ZEPHYR);
  // Qwen2.5 (ChatML, no <think>) stays CHATML; <think> alone, without ChatML, is not Qwen3.
  expect_detected(kChatMlSource, ChatTemplateKind::CHATML);
  EXPECT_FALSE(detect_chat_template("{{ '<think>' }}").ok());
  // A Llama-3 template mentioning <think> is still Llama-3.
  expect_detected("<|start_header_id|><think>", ChatTemplateKind::LLAMA3);
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

  Result<GgufFile> unknown = gguf_with(
      "unknown.gguf", {{std::string(kChatTemplateKey), GgufValue{std::string("{{ messages }}")}}});
  ASSERT_TRUE(unknown.ok()) << unknown.error().message;
  kind = detect_chat_template(*unknown);
  ASSERT_FALSE(kind.ok());
  EXPECT_TRUE(mentions(kind.error(),
                       "unknown.gguf: tokenizer.chat_template: the chat template is "
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

}  // namespace
}  // namespace trellis
