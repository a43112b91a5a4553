// The tools of a chat request and the grammar that makes the model's tool calls well formed: the
// call markup of the model's family, a declared function's name, and arguments that validate
// against that function's parameter schema.
//
//   tool_choice auto      free text, then optionally calls (HERMES: text that never spells
//                         <tool_call> until the calls begin; LLAMA3_JSON: text or one call object;
//                         GENERIC: {"response": ...} or {"tool_calls": [...]})
//   tool_choice required  calls only;  a named function: calls of that function only
//   parallel_tool_calls   false: at most one call
// A Qwen3 reply may open with its <think> block (free text up to </think>) before any of this.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "base/result.h"
#include "grammar/json_schema_grammar.h"
#include "tokenizer/chat_tools.h"

namespace trellis {

struct RequestTool {
  std::string name;                   // [a-zA-Z0-9_-]{1,64}
  std::string description;            // "" when not given
  nlohmann::ordered_json parameters;  // an object schema; null when not given (any object)
};

enum class ToolChoiceMode { NONE, AUTO, REQUIRED, NAMED };

struct ToolChoice {
  ToolChoiceMode mode = ToolChoiceMode::AUTO;
  std::string name;  // NAMED: the function
};

struct ToolGrammarOptions {
  ToolCallSyntax syntax = ToolCallSyntax::GENERIC;
  ToolChoice choice;
  bool parallel = true;
  bool reasoning = false;   // the reply may open with <think>...</think>
  JsonGrammarOptions json;  // the arguments' schemas (flexible whitespace: as models write JSON)
};

// GBNF with a `root` for the replies `tools` allow under `options`. Precondition: tools not empty,
// choice not NONE. Errors: a parameter schema outside the subset (named with its function), past
// the limits.
Result<std::string> tool_call_gbnf(std::span<const RequestTool> tools,
                                   const ToolGrammarOptions& options);

}  // namespace trellis
