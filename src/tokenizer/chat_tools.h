// Tools in a chat: the functions a model may call, its calls, and their results, written into the
// conversation the way each family was trained to see them, so that the plain renderer of
// chat_template.h can render it.
//
//   HERMES (CHATML, QWEN3: Qwen2.5, Qwen3)  the tools as JSON lines inside <tools></tools> at the
//     end of the system message; a call as
//       <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>
//     after the assistant's text; results as <tool_response>\n...\n</tool_response> in a user turn
//     (consecutive results share one turn).
//   LLAMA3_JSON (LLAMA3: Llama 3.1/3.2)  the tools and the instruction to answer with
//     {"name": NAME, "parameters": ARGS} open the first user message; a call is that JSON alone as
//     the assistant's message; results go in "ipython" turns.
//   FUNCTOOLS (PHI4: Phi-4-mini)  the tools as a JSON list between <|tool|> markers in the system
//     message; calls as  functools[{"name": NAME, "arguments": ARGS}, ...]  after the text;
//     results as user messages "Tool result (ID): ...".
//   HARMONY (gpt-oss)  the tools as a TypeScript namespace in the developer message (the caller
//     writes it: harmony_tools_text), each call a message of its own to functions.NAME on the
//     commentary channel, each result a message from functions.NAME (chat_template.h renders
//     both from the calls and the "tool" messages this keeps).
//   GENERIC (every other format)  the tools and the instruction to answer with a JSON object,
//       {"tool_calls": [{"name": NAME, "arguments": ARGS}, ...]}  or  {"response": TEXT}
//     in the system text (folded into the first user turn where the format has no system role);
//     a call is that JSON as the assistant's message; results are user messages
//     "Tool result (ID): ..." (joined with the user message that follows where the format needs
//     turns to alternate: LLAMA2, MISTRAL, GEMMA).
// ARGS is the call's arguments text exactly as the model wrote it (or the client sent it), so that
// a conversation rendered again reproduces the model's earlier turns.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "tokenizer/chat_template.h"

namespace trellis {

struct ChatTool {
  std::string name;
  std::string description;  // may be empty
  std::string parameters;   // a JSON schema's text (an object schema)
};

enum class ToolCallSyntax { HERMES, LLAMA3_JSON, FUNCTOOLS, HARMONY, GENERIC };

ToolCallSyntax tool_call_syntax(ChatTemplateKind kind);

// `messages` (roles system, user, assistant, tool) with `tools`, the assistants' tool_calls and the
// tool results written out as plain messages for `kind` (see the table above). Assistant
// messages keep their text; a tool message's content is its result.
std::vector<ChatMessage> with_tools_written_out(ChatTemplateKind kind,
                                                std::span<const ChatMessage> messages,
                                                std::span<const ChatTool> tools);

// HARMONY: `text` (the tools' namespace) joins the system message, a new one first when there is
// none.
void add_harmony_tools(std::vector<ChatMessage>& messages, std::string text);

// How one call is written in the assistant's text (and what the constrained reply produces).
std::string written_tool_call(ToolCallSyntax syntax, const ChatToolCall& call);

}  // namespace trellis
