// Splitting a chat reply into reasoning, content and tool calls: the same result whether the
// text arrives whole or one byte at a time, markers never leaking into the content.
#include "server/reply_splitter.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace trellis {
namespace {

struct Split {
  std::string reasoning, content;
  std::vector<ChatToolCall> calls;
};

Split split(const ReplyFormat& format, const std::string& text, size_t piece) {
  ReplySplitter splitter(format);
  Split out;
  for (size_t i = 0; i < text.size(); i += piece) {
    ReplyDelta d = splitter.push(std::string_view(text).substr(i, piece));
    out.reasoning += d.reasoning;
    out.content += d.content;
  }
  ReplyDelta d = splitter.finish(out.calls, "call_x_");
  out.reasoning += d.reasoning;
  out.content += d.content;
  return out;
}

// Whole and byte by byte must agree.
Split split_both(const ReplyFormat& format, const std::string& text) {
  const Split whole = split(format, text, text.size() + 1);
  const Split bytes = split(format, text, 1);
  EXPECT_EQ(whole.reasoning, bytes.reasoning) << text;
  EXPECT_EQ(whole.content, bytes.content) << text;
  EXPECT_EQ(whole.calls.size(), bytes.calls.size()) << text;
  return whole;
}

TEST(ReplySplitterTest, ReasoningGoesApart) {
  const ReplyFormat qwen3{true, std::nullopt};
  Split s = split_both(qwen3, "<think>\nLet me see: 2+2.\n</think>\n\nIt is 4.");
  EXPECT_EQ(s.reasoning, "\nLet me see: 2+2.\n");
  EXPECT_EQ(s.content, "It is 4.");
  s = split_both(qwen3, "No thinking here <think> is text");
  EXPECT_EQ(s.reasoning, "");
  EXPECT_EQ(s.content, "No thinking here <think> is text");
  s = split_both(qwen3, "<thi");  // cut short: what came is content
  EXPECT_EQ(s.content, "<thi");
  s = split_both(qwen3, "<think>unfinished </thi");
  EXPECT_EQ(s.reasoning, "unfinished </thi");
  s = split_both(ReplyFormat{false, std::nullopt}, "<think>kept inline</think>x");
  EXPECT_EQ(s.content, "<think>kept inline</think>x");
}

TEST(ReplySplitterTest, HarmonyAnalysisIsReasoningAndTheOtherChannelsContent) {
  ReplyFormat harmony{true, std::nullopt};
  harmony.harmony = true;
  Split s = split_both(harmony,
                       "<|channel|>analysis<|message|>User asks 2+2. Easy.<|end|>"
                       "<|start|>assistant<|channel|>final<|message|>It is 4.");
  EXPECT_EQ(s.reasoning, "User asks 2+2. Easy.");
  EXPECT_EQ(s.content, "It is 4.");
  // A commentary preamble is content too; a constrained header is read through.
  s = split_both(harmony,
                 "<|channel|>commentary <|constrain|>json<|message|>{\"a\": 1}<|end|>"
                 "<|start|>assistant<|channel|>final<|message|>Done");
  EXPECT_EQ(s.reasoning, "");
  EXPECT_EQ(s.content, "{\"a\": 1}Done");
  // Cut inside the reasoning, or inside the next header: what came is kept, markup is not.
  s = split_both(harmony, "<|channel|>analysis<|message|>Thinking <|e");
  EXPECT_EQ(s.reasoning, "Thinking <|e");
  s = split_both(harmony, "<|channel|>analysis<|message|>A.<|end|><|start|>assis");
  EXPECT_EQ(s.reasoning, "A.");
  EXPECT_EQ(s.content, "");
  // A model that writes no header: its text is content.
  s = split_both(harmony, "Plain words, no channels.");
  EXPECT_EQ(s.content, "Plain words, no channels.");
  // Reasoning not separated: the analysis joins the content, the markup still goes.
  harmony.split_reasoning = false;
  s = split_both(harmony,
                 "<|channel|>analysis<|message|>R<|end|><|start|>assistant<|channel|>final"
                 "<|message|>A");
  EXPECT_EQ(s.content, "RA");
}

TEST(ReplySplitterTest, HarmonyMessagesToFunctionsAreCalls) {
  ReplyFormat harmony{true, ToolCallSyntax::HARMONY};
  harmony.harmony = true;
  // The recipient after the channel (as gpt-oss usually writes it) or before it; the arguments
  // end at <|call|> (the reply's end, as <|call|> stops generation) or <|end|>.
  Split s = split_both(harmony,
                       "<|channel|>analysis<|message|>Need the weather.<|end|>"
                       "<|start|>assistant<|channel|>commentary to=functions.get_weather "
                       "<|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>");
  EXPECT_EQ(s.reasoning, "Need the weather.");
  EXPECT_EQ(s.content, "");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].name, "get_weather");
  EXPECT_EQ(s.calls[0].arguments, "{\"city\": \"Paris\"}");
  EXPECT_EQ(s.calls[0].id, "call_x_0");
  s = split_both(harmony,
                 "<|channel|>commentary<|message|>Checking both.<|end|>"
                 "<|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>"
                 "{\"zone\": \"UTC\"}<|end|><|start|>assistant to=functions.get_weather"
                 "<|channel|>commentary json<|message|>{}");
  EXPECT_EQ(s.content, "Checking both.");
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.calls[0].name, "get_time");
  EXPECT_EQ(s.calls[0].arguments, "{\"zone\": \"UTC\"}");
  EXPECT_EQ(s.calls[1].name, "get_weather");
  EXPECT_EQ(s.calls[1].arguments, "{}");
  EXPECT_EQ(s.calls[1].id, "call_x_1");
  // Another recipient is not a function: its message is text. Without tools nothing is a call.
  s = split_both(harmony, "<|channel|>commentary to=browser.search<|message|>q<|end|>");
  EXPECT_EQ(s.content, "q");
  EXPECT_TRUE(s.calls.empty());
  harmony.tools = std::nullopt;
  s = split_both(harmony,
                 "<|channel|>commentary to=functions.get_time<|message|>{\"zone\": 1}<|call|>");
  EXPECT_TRUE(s.calls.empty());
  EXPECT_EQ(s.content, "{\"zone\": 1}<|call|>");
}

TEST(ReplySplitterTest, HermesCallsAfterContent) {
  const ReplyFormat hermes{true, ToolCallSyntax::HERMES};
  const std::string reply =
      "<think>need weather</think>\n\nLet me check.\n<tool_call>\n{\"name\": \"get_weather\", "
      "\"arguments\": {\"city\": \"Paris\",  \"unit\": \"c\"}}\n</tool_call>\n<tool_call>\n"
      "{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  Split s = split_both(hermes, reply);
  EXPECT_EQ(s.reasoning, "need weather");
  EXPECT_EQ(s.content, "Let me check.");  // the newline before the call is markup
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.calls[0].name, "get_weather");
  EXPECT_EQ(s.calls[0].arguments, "{\"city\": \"Paris\",  \"unit\": \"c\"}");  // verbatim
  EXPECT_EQ(s.calls[0].id, "call_x_0");
  EXPECT_EQ(s.calls[1].name, "get_time");
  EXPECT_EQ(s.calls[1].arguments, "{}");
  EXPECT_EQ(s.calls[1].id, "call_x_1");

  s = split_both(hermes, "Two lines\n\n\nthen <tool_ca no call");
  EXPECT_EQ(s.content, "Two lines\n\n\nthen <tool_ca no call");
  EXPECT_TRUE(s.calls.empty());
  // A call cut by max_tokens stays text.
  s = split_both(hermes, "<tool_call>\n{\"name\": \"f\", \"argu");
  EXPECT_TRUE(s.calls.empty());
  EXPECT_EQ(s.content, "<tool_call>\n{\"name\": \"f\", \"argu");
}

TEST(ReplySplitterTest, FunctoolsAfterContent) {
  const ReplyFormat phi4{false, ToolCallSyntax::FUNCTOOLS};
  Split s = split_both(phi4,
                       "Checking.\nfunctools[{\"name\": \"a\", \"arguments\": {\"x\": [1, 2]}}, "
                       "{\"name\": \"b\", \"arguments\": {}}]");
  EXPECT_EQ(s.content, "Checking.\n");
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.calls[0].arguments, "{\"x\": [1, 2]}");
  EXPECT_EQ(s.calls[1].name, "b");
  s = split_both(phi4, "no functools here, functools[broken");
  EXPECT_TRUE(s.calls.empty());
  EXPECT_EQ(s.content, "no functools here, functools[broken");
}

TEST(ReplySplitterTest, Llama3AndGenericForms) {
  const ReplyFormat llama{false, ToolCallSyntax::LLAMA3_JSON};
  Split s = split_both(llama, "{\"name\": \"lookup\", \"parameters\": {\"q\": \"x\"}}");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].name, "lookup");
  EXPECT_EQ(s.calls[0].arguments, "{\"q\": \"x\"}");
  EXPECT_EQ(s.content, "");
  s = split_both(llama, "Plain {answer}");
  EXPECT_EQ(s.content, "Plain {answer}");
  EXPECT_TRUE(s.calls.empty());

  const ReplyFormat generic{false, ToolCallSyntax::GENERIC};
  s = split_both(generic,
                 "{\"tool_calls\": [{\"name\": \"a\", \"arguments\": {\"n\": 1}}, "
                 "{\"name\": \"b\", \"arguments\": {}}]}");
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.calls[1].name, "b");
  s = split_both(generic, "{\"response\": \"Hi \\\"there\\\"\"}");
  EXPECT_TRUE(s.calls.empty());
  EXPECT_EQ(s.content, "Hi \"there\"");
  // Cut by max_tokens inside the answer: the answer so far, without its wrapper.
  s = split_both(generic, "{\"response\": \"Line\\none \\u00e");
  EXPECT_EQ(s.content, "Line\none ");
  s = split_both(generic, "{\"response\": \"caf\\u00e9 \\ud83d\\ude00!\"}");
  EXPECT_EQ(s.content, "caf\xC3\xA9 \xF0\x9F\x98\x80!");
  // The answer streams: its text comes out as the reply is generated, not at the end.
  ReplySplitter streaming(generic);
  EXPECT_EQ(streaming.push("{\"respo").content, "");
  EXPECT_EQ(streaming.push("nse\": \"Hel").content, "Hel");
  EXPECT_EQ(streaming.push("lo \\").content, "lo ");
  EXPECT_EQ(streaming.push("\"you\\\"").content, "\"you\"");
}

}  // namespace
}  // namespace trellis
