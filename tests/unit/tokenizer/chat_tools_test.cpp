// Tools, calls and results written into a conversation in each family's syntax, and a
// remembered reply's tokens spliced into an encoded conversation.
#include "tokenizer/chat_tools.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace trellis {
namespace {

const std::vector<ChatTool> kTools = {
    {"get_weather", "Weather in a city",
     R"({"type": "object", "properties": {"city": {"type": "string"}}})"}};

std::vector<ChatMessage> agent_turns() {
  return {{"user", "Weather in Paris?"},
          {"assistant", "", {{"call_1", "get_weather", R"({"city":  "Paris"})"}}},
          {"tool", "{\"temp\": 21}", {}, "call_1"},
          {"user", "Thanks"}};
}

TEST(ChatToolsTest, HermesWritesToolsCallsAndResults) {
  const std::vector<ChatMessage> out =
      with_tools_written_out(ChatTemplateKind::CHATML, agent_turns(), kTools);
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[0].role, "system");
  EXPECT_NE(out[0].content.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": "
                                "\"get_weather\", \"description\": \"Weather in a city\", "
                                "\"parameters\": {\"type\": \"object\""),
            std::string::npos)
      << out[0].content;
  // The arguments are written exactly as given (two spaces kept).
  EXPECT_EQ(out[2].content,
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":  \"Paris\"}}\n"
            "</tool_call>");
  EXPECT_EQ(out[3].role, "user");
  EXPECT_EQ(out[3].content, "<tool_response>\n{\"temp\": 21}\n</tool_response>");
  Result<std::string> text = render_chat(ChatTemplateKind::CHATML, out);
  ASSERT_TRUE(text.ok()) << text.error().message;
}

TEST(ChatToolsTest, Llama3AndGenericForms) {
  std::vector<ChatMessage> llama =
      with_tools_written_out(ChatTemplateKind::LLAMA3, agent_turns(), kTools);
  ASSERT_EQ(llama.size(), 4u);
  EXPECT_EQ(llama[0].content.rfind("Given the following functions", 0), 0u);
  EXPECT_EQ(llama[1].content,
            "{\"name\": \"get_weather\", \"parameters\": {\"city\":  \"Paris\"}}");
  EXPECT_EQ(llama[2].role, "ipython");
  Result<std::string> text = render_chat(ChatTemplateKind::LLAMA3, llama);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_NE(text->find("<|start_header_id|>ipython<|end_header_id|>\n\n{\"temp\": 21}<|eot_id|>"),
            std::string::npos);

  // Gemma has no system role and needs alternation: the generic form keeps both.
  std::vector<ChatMessage> gemma =
      with_tools_written_out(ChatTemplateKind::GEMMA, agent_turns(), kTools);
  EXPECT_EQ(
      gemma[2].content,
      "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"city\":  \"Paris\"}}]}");
  // The tool result and the next user message become one user turn: the turns alternate.
  ASSERT_EQ(gemma.size(), 4u);
  EXPECT_EQ(gemma[3].content, "Tool result (call_1): {\"temp\": 21}\n\nThanks");
  Result<std::string> gemma_text = render_chat(ChatTemplateKind::GEMMA, gemma);
  EXPECT_TRUE(gemma_text.ok()) << gemma_text.error().message;
}

TEST(ChatToolsTest, RememberedReplyTokensAreSplicedIn) {
  Vocab vocab = testing::byte_fallback_vocab();
  testing::add_token(vocab, "<|im_start|>", TokenType::CONTROL);
  testing::add_token(vocab, "<|im_end|>", TokenType::CONTROL);
  testing::add_token(vocab, "ab", TokenType::NORMAL, 5.0f);
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::create(std::move(vocab));
  ASSERT_TRUE(tokenizer.ok());
  const std::vector<ChatMessage> chat = {{"user", "hi"}, {"assistant", "abab"}, {"user", "more"}};
  ChatRenderOptions plain;
  Result<std::vector<TokenId>> normal =
      encode_chat(**tokenizer, ChatTemplateKind::CHATML, chat, plain);
  ASSERT_TRUE(normal.ok());
  // The model had spelled "abab" byte by byte: those tokens come back, the rest is unchanged.
  std::vector<TokenId> spelled;
  for (char c : std::string("abab")) {
    const std::vector<TokenId> one = (*tokenizer)->encode(std::string(1, c), false, false);
    spelled.insert(spelled.end(), one.begin(), one.end());
  }
  ChatRenderOptions remembered;
  remembered.reply_tokens = [&](std::string_view text) -> const std::vector<TokenId>* {
    return text == "abab" ? &spelled : nullptr;
  };
  Result<std::vector<TokenId>> spliced =
      encode_chat(**tokenizer, ChatTemplateKind::CHATML, chat, remembered);
  ASSERT_TRUE(spliced.ok());
  EXPECT_EQ((*tokenizer)->decode(*spliced, true), (*tokenizer)->decode(*normal, true));
  EXPECT_EQ(spliced->size(), normal->size() + 2) << "two 'ab' tokens became four byte tokens";
  const auto at = std::search(spliced->begin(), spliced->end(), spelled.begin(), spelled.end());
  EXPECT_NE(at, spliced->end());
}

}  // namespace
}  // namespace trellis
