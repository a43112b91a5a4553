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

}  // namespace

Result<std::string> tool_call_gbnf(std::span<const RequestTool> tools,
                                   const ToolGrammarOptions& options) {
  std::string rules;
  const bool auto_choice = options.choice.mode == ToolChoiceMode::AUTO;
  std::string body;
  switch (options.syntax) {
    case ToolCallSyntax::HERMES: {
      std::string alternatives;
      TRELLIS_ASSIGN(alternatives, named_arguments(tools, options, "arguments", rules));
      rules += "call ::= " + gbnf_literal("<tool_call>\n{\"name\": \"") + " (" + alternatives +
               ") " + gbnf_literal("}\n</tool_call>") + "\n";
      const std::string calls = repeated("call", "\n", options.parallel);
      if (auto_choice) {
        rules += text_without_gbnf("<tool_call>", "free");
        body = "free (" + calls + ")?";
      } else {
        body = calls;
      }
      break;
    }
    case ToolCallSyntax::LLAMA3_JSON: {
      std::string alternatives;
      TRELLIS_ASSIGN(alternatives, named_arguments(tools, options, "parameters", rules));
      rules += "call ::= " + gbnf_literal("{\"name\": \"") + " (" + alternatives + ") \"}\"\n";
      // Free text is anything that does not open with '{' (an object is a call).
      body = auto_choice ? "call | ([^{] .*)?" : "call";
      break;
    }
    case ToolCallSyntax::FUNCTOOLS: {
      std::string alternatives;
      TRELLIS_ASSIGN(alternatives, named_arguments(tools, options, "arguments", rules));
      rules += "call ::= " + gbnf_literal("{\"name\": \"") + " (" + alternatives + ") \"}\"\n";
      const std::string calls =
          gbnf_literal("functools[") + " " + repeated("call", ", ", options.parallel) + " \"]\"";
      if (auto_choice) {
        rules += text_without_gbnf("functools[", "free");
        body = "free (" + calls + ")?";
      } else {
        body = calls;
      }
      break;
    }
    case ToolCallSyntax::GENERIC: {
      std::string alternatives;
      TRELLIS_ASSIGN(alternatives, named_arguments(tools, options, "arguments", rules));
      rules += "call ::= " + gbnf_literal("{\"name\": \"") + " (" + alternatives + ") \"}\"\n";
      body = gbnf_literal("{\"tool_calls\": [") + " " + repeated("call", ", ", options.parallel) +
             " " + gbnf_literal("]}");
      if (auto_choice) {
        std::string text;
        TRELLIS_ASSIGN(text, json_schema_to_gbnf(nlohmann::ordered_json{{"type", "string"}},
                                                 options.json));
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
