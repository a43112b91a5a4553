#include "server/tool_call_grammar.h"

#include "grammar/gbnf_compose.h"
#include "grammar/regex_grammar.h"

namespace trellis {

namespace {

// One alternative per callable function: `"NAME", "<key>": ` + its arguments' rule.
Result<std::string> named_arguments(std::span<const RequestTool> tools,
                                    const ToolGrammarOptions& options, const char* key,
                                    std::string& rules) {
  std::string alternatives;
  for (size_t i = 0; i < tools.size(); ++i) {
    const RequestTool& tool = tools[i];
    if (options.choice.mode == ToolChoiceMode::NAMED && tool.name != options.choice.name) continue;
    const nlohmann::ordered_json schema =
        tool.parameters.is_null() ? nlohmann::ordered_json{{"type", "object"}} : tool.parameters;
    Result<std::string> arguments = json_schema_to_gbnf(schema, options.json);
    if (!arguments.ok())
      return Error{"function '" + tool.name + "' parameters: " + arguments.error().message};
    const std::string prefix = "f" + std::to_string(i) + "-";
    rules += prefix_gbnf_rules(*arguments, prefix);
    if (!alternatives.empty()) alternatives += " | ";
    alternatives += gbnf_literal(tool.name + "\", \"" + key + "\": ") + " " + prefix + "root";
  }
  return alternatives;
}

std::string repeated(const std::string& item, const std::string& separator, bool parallel) {
  return parallel ? item + " (" + gbnf_literal(separator) + " " + item + ")*" : item;
}

// The calls `open` call (separator call)* `close`, after free text that never spells `marker`
// (the start of `open`: what the reply splitter looks for) when the choice is auto.
std::string calls_after_text(const std::string& marker, const std::string& open,
                             const std::string& separator, const std::string& close,
                             const ToolGrammarOptions& options, std::string& rules) {
  const std::string calls = gbnf_literal(open) + " " +
                            repeated("call", separator, options.parallel) + " " +
                            gbnf_literal(close);
  if (options.choice.mode != ToolChoiceMode::AUTO) return calls;
  rules += text_without_gbnf(marker, "free");
  return "free (" + calls + ")?";
}

}  // namespace

Result<std::string> tool_call_gbnf(std::span<const RequestTool> tools,
                                   const ToolGrammarOptions& options) {
  std::string rules;
  const bool auto_choice = options.choice.mode == ToolChoiceMode::AUTO;
  // call ::= {"name": "NAME", "<key>": ARGS}, one alternative per callable function (HERMES
  // wraps it in its block: its calls are separated by nothing but that block's own newline).
  const char* key = options.syntax == ToolCallSyntax::LLAMA3_JSON ? "parameters" : "arguments";
  std::string alternatives;
  TRELLIS_ASSIGN(alternatives, named_arguments(tools, options, key, rules));
  rules += "call ::= " + gbnf_literal("{\"name\": \"") + " (" + alternatives + ") \"}\"\n";
  std::string body;
  switch (options.syntax) {
    case ToolCallSyntax::HERMES:
      body = calls_after_text("<tool_call>", "<tool_call>\n", "\n</tool_call>\n<tool_call>\n",
                              "\n</tool_call>", options, rules);
      break;
    case ToolCallSyntax::LLAMA3_JSON:
      // Free text is anything that does not open with '{' (an object is a call).
      body = auto_choice ? "call | ([^{] .*)?" : "call";
      break;
    case ToolCallSyntax::FUNCTOOLS:
      body = calls_after_text("functools[", "functools[", ", ", "]", options, rules);
      break;
    case ToolCallSyntax::HARMONY:  // its calls' headers are markup tokens: not constrained
      return Error{"the harmony format's calls cannot be constrained by a grammar"};
    case ToolCallSyntax::GENERIC: {
      body = gbnf_literal("{\"tool_calls\": [") + " " + repeated("call", ", ", options.parallel) +
             " " + gbnf_literal("]}");
      if (auto_choice) {
        std::string text;
        TRELLIS_ASSIGN(
            text, json_schema_to_gbnf(nlohmann::ordered_json{{"type", "string"}}, options.json));
        rules += prefix_gbnf_rules(text, "text-");
        body = "(" + body + ") | " + gbnf_literal("{\"response\": ") + " text-root \"}\"";
      }
      break;
    }
  }
  std::string root = "root ::= " + body + "\n";
  if (options.reasoning) {
    rules += text_without_gbnf("</think>", "thought");
    root = "root ::= (\"<think>\" thought \"</think>\" \"\\n\"{0,2})? answer\nanswer ::= " + body +
           "\n";
  }
  return root + rules;
}

}  // namespace trellis
