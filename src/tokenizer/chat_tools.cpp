#include "tokenizer/chat_tools.h"

namespace trellis {

namespace {

// `text` as a JSON string literal.
std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (byte < 0x20) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\u00";
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// {"type": "function", "function": {"name": ..., "description": ..., "parameters": ...}}, with the
// spaces Python's json.dumps writes (what the published templates produce).
std::string tool_json(const ChatTool& tool) {
  std::string out = "{\"type\": \"function\", \"function\": {\"name\": " + json_string(tool.name);
  if (!tool.description.empty()) out += ", \"description\": " + json_string(tool.description);
  out += ", \"parameters\": " + (tool.parameters.empty() ? std::string("{}") : tool.parameters);
  return out + "}}";
}

std::string hermes_tools_text(std::span<const ChatTool> tools) {
  std::string text =
      "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
  for (const ChatTool& tool : tools) text += "\n" + tool_json(tool);
  text +=
      "\n</tools>\n\nFor each function call, return a json object with function name and "
      "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
      "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>";
  return text;
}

std::string llama3_tools_text(std::span<const ChatTool> tools) {
  std::string text =
      "Given the following functions, please respond with a JSON for a function call with its "
      "proper arguments that best answers the given prompt.\n\nRespond in the format "
      "{\"name\": function name, \"parameters\": dictionary of argument name and its value}."
      "Do not use variables.\n\n";
  for (const ChatTool& tool : tools) text += tool_json(tool) + "\n\n";
  return text;
}

std::string generic_tools_text(std::span<const ChatTool> tools) {
  std::string text = "You can call these tools:\n";
  for (const ChatTool& tool : tools) text += tool_json(tool) + "\n";
  text +=
      "\nAnswer with a JSON object: {\"tool_calls\": [{\"name\": <tool name>, \"arguments\": "
      "<arguments object>}]} to call tools, or {\"response\": <your answer>} to answer.";
  return text;
}

// {"name": NAME, "arguments": ARGS} for each call, joined by ", " between `open` and `close`.
std::string calls_list_text(std::span<const ChatToolCall> calls, std::string_view open,
                            std::string_view close) {
  std::string text(open);
  for (size_t i = 0; i < calls.size(); ++i) {
    if (i > 0) text += ", ";
    text += "{\"name\": " + json_string(calls[i].name) + ", \"arguments\": " +
            (calls[i].arguments.empty() ? std::string("{}") : calls[i].arguments) + "}";
  }
  return text + std::string(close);
}

std::string generic_calls_text(std::span<const ChatToolCall> calls) {
  return calls_list_text(calls, "{\"tool_calls\": [", "]}");
}

// Phi-4-mini's list: the functions themselves, without OpenAI's {"type": "function"} wrapper.
std::string phi4_tools_json(std::span<const ChatTool> tools) {
  std::string text = "[";
  for (size_t i = 0; i < tools.size(); ++i) {
    if (i > 0) text += ", ";
    text += "{\"name\": " + json_string(tools[i].name);
    if (!tools[i].description.empty())
      text += ", \"description\": " + json_string(tools[i].description);
    text += ", \"parameters\": " +
            (tools[i].parameters.empty() ? std::string("{}") : tools[i].parameters) + "}";
  }
  return text + "]";
}

// Adds `text` to the system message (a new one first when there is none).
void add_system_text(std::vector<ChatMessage>& out, const std::string& text) {
  if (!out.empty() && out.front().role == "system") {
    out.front().content += (out.front().content.empty() ? "" : "\n\n") + text;
  } else {
    out.insert(out.begin(), ChatMessage{"system", text, {}, {}});
  }
}

std::string assistant_text(ToolCallSyntax syntax, const ChatMessage& m) {
  if (m.tool_calls.empty()) return m.content;
  if (syntax == ToolCallSyntax::GENERIC) return generic_calls_text(m.tool_calls);
  if (syntax == ToolCallSyntax::FUNCTOOLS)  // the text, then all calls in one list
    return m.content + calls_list_text(m.tool_calls, "functools[", "]");
  std::string text = m.content;
  for (const ChatToolCall& call : m.tool_calls) {
    if (syntax == ToolCallSyntax::HERMES) {
      if (!text.empty()) text += "\n";
      text += written_tool_call(syntax, call);
    } else {  // LLAMA3_JSON: one call per message, the JSON alone
      text = written_tool_call(syntax, call);
    }
  }
  return text;
}

// HARMONY keeps the calls and results for its renderer; a result learns its function's name from
// the call it answers (by id; without a match, the latest call's).
std::vector<ChatMessage> with_harmony_tool_turns(std::span<const ChatMessage> messages) {
  std::vector<ChatMessage> out(messages.begin(), messages.end());
  std::vector<const ChatToolCall*> calls;
  for (ChatMessage& m : out) {
    for (const ChatToolCall& call : m.tool_calls) calls.push_back(&call);
    if (m.role != "tool") continue;
    m.tool_name = calls.empty() ? "unknown" : calls.back()->name;
    for (const ChatToolCall* call : calls) {
      if (!m.tool_call_id.empty() && call->id == m.tool_call_id) m.tool_name = call->name;
    }
  }
  return out;
}

}  // namespace

ToolCallSyntax tool_call_syntax(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::CHATML:
    case ChatTemplateKind::QWEN3:
      return ToolCallSyntax::HERMES;
    case ChatTemplateKind::LLAMA3:
      return ToolCallSyntax::LLAMA3_JSON;
    case ChatTemplateKind::PHI4:
      return ToolCallSyntax::FUNCTOOLS;
    case ChatTemplateKind::HARMONY:
      return ToolCallSyntax::HARMONY;
    default:
      return ToolCallSyntax::GENERIC;
  }
}

std::string written_tool_call(ToolCallSyntax syntax, const ChatToolCall& call) {
  const std::string args = call.arguments.empty() ? "{}" : call.arguments;
  if (syntax == ToolCallSyntax::HERMES)
    return "<tool_call>\n{\"name\": " + json_string(call.name) + ", \"arguments\": " + args +
           "}\n</tool_call>";
  if (syntax == ToolCallSyntax::LLAMA3_JSON)
    return "{\"name\": " + json_string(call.name) + ", \"parameters\": " + args + "}";
  if (syntax == ToolCallSyntax::FUNCTOOLS)
    return calls_list_text(std::span<const ChatToolCall>(&call, 1), "functools[", "]");
  if (syntax == ToolCallSyntax::HARMONY)
    return "<|start|>assistant to=functions." + call.name +
           "<|channel|>commentary json<|message|>" + args + "<|call|>";
  return generic_calls_text(std::span<const ChatToolCall>(&call, 1));
}

void add_harmony_tools(std::vector<ChatMessage>& messages, std::string text) {
  if (messages.empty() || messages.front().role != "system")
    messages.insert(messages.begin(), ChatMessage{"system", ""});
  messages.front().tools_json = std::move(text);
}

std::vector<ChatMessage> with_tools_written_out(ChatTemplateKind kind,
                                                std::span<const ChatMessage> messages,
                                                std::span<const ChatTool> tools) {
  const ToolCallSyntax syntax = tool_call_syntax(kind);
  if (syntax == ToolCallSyntax::HARMONY) return with_harmony_tool_turns(messages);
  std::vector<ChatMessage> out;
  for (const ChatMessage& m : messages) {
    if (m.role == "assistant") {
      out.push_back({"assistant", assistant_text(syntax, m), {}, {}});
    } else if (m.role != "tool") {
      out.push_back({m.role, m.content, {}, {}});
    } else if (syntax == ToolCallSyntax::HERMES) {
      const std::string block = "<tool_response>\n" + m.content + "\n</tool_response>";
      // Consecutive results share one user turn.
      if (!out.empty() && out.back().role == "user" &&
          out.back().content.rfind("<tool_response>", 0) == 0) {
        out.back().content += "\n" + block;
      } else {
        out.push_back({"user", block, {}, {}});
      }
    } else if (syntax == ToolCallSyntax::LLAMA3_JSON) {
      out.push_back({"ipython", m.content, {}, {}});
    } else {
      out.push_back({"user",
                     "Tool result" + (m.tool_call_id.empty() ? "" : " (" + m.tool_call_id + ")") +
                         ": " + m.content,
                     {},
                     {}});
    }
  }
  // The [INST] formats and Gemma need user and assistant turns to alternate: a tool result and
  // the user message after it become one user turn.
  if (kind == ChatTemplateKind::LLAMA2 || kind == ChatTemplateKind::MISTRAL ||
      kind == ChatTemplateKind::GEMMA) {
    std::vector<ChatMessage> merged;
    for (ChatMessage& m : out) {
      if (!merged.empty() && merged.back().role == "user" && m.role == "user") {
        merged.back().content += "\n\n" + m.content;
      } else {
        merged.push_back(std::move(m));
      }
    }
    out = std::move(merged);
  }
  if (tools.empty()) return out;
  if (syntax == ToolCallSyntax::FUNCTOOLS) {
    if (out.empty() || out.front().role != "system")
      out.insert(out.begin(), ChatMessage{"system", ""});
    out.front().tools_json = phi4_tools_json(tools);
    return out;
  }
  if (syntax == ToolCallSyntax::LLAMA3_JSON) {
    for (ChatMessage& m : out) {
      if (m.role != "user") continue;
      m.content = llama3_tools_text(tools) + m.content;
      break;
    }
  } else {
    add_system_text(out, syntax == ToolCallSyntax::HERMES ? hermes_tools_text(tools)
                                                          : generic_tools_text(tools));
  }
  return out;
}

}  // namespace trellis
