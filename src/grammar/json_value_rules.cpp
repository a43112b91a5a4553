#include "grammar/json_value_rules.h"

namespace trellis {

const char* json_ws_separator(JsonWhitespace whitespace) {
  return whitespace == JsonWhitespace::FLEXIBLE ? " ws " : " ";
}

std::vector<JsonValueRule> json_value_rules(JsonWhitespace whitespace) {
  const std::string w = json_ws_separator(whitespace);
  const bool flexible = whitespace == JsonWhitespace::FLEXIBLE;
  auto with_ws = [&](std::vector<std::string> uses) {
    if (flexible) uses.push_back("ws");
    return uses;
  };
  std::vector<JsonValueRule> rules = {
      {"json-value",
       "json-object | json-array | json-string | json-number | \"true\" | \"false\" | \"null\"",
       {"json-object", "json-array", "json-string", "json-number"}},
      {"json-object",
       "\"{\"" + w + "( json-member (" + w + "\",\"" + w + "json-member )*" +
           (flexible ? " ws" : "") + " )? \"}\"",
       with_ws({"json-member"})},
      {"json-member", "json-string" + w + "\":\"" + w + "json-value",
       with_ws({"json-string", "json-value"})},
      {"json-array",
       "\"[\"" + w + "( json-value (" + w + "\",\"" + w + "json-value )*" +
           (flexible ? " ws" : "") + " )? \"]\"",
       with_ws({"json-value"})},
      {"json-string", "\"\\\"\" json-char* \"\\\"\"", {"json-char"}},
      {"json-char",
       "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" json-unicode )",
       {"json-unicode"}},
      {"json-unicode",
       "[0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} | "
       "[dD] [89abAB] [0-9a-fA-F]{2} \"\\\\u\" [dD] [c-fC-F] [0-9a-fA-F]{2}",
       {}},
      {"json-number", "json-integer ( \".\" [0-9]+ )? ( [eE] [\\-+]? [0-9]+ )?", {"json-integer"}},
      {"json-integer", "\"-\"? json-natural", {"json-natural"}},
      {"json-natural", "\"0\" | [1-9] [0-9]*", {}},
  };
  if (flexible) rules.push_back({"ws", "( \" \" | \"\\n\" \"\\n\"? [ \\t]{0,20} )?", {}});
  return rules;
}

}  // namespace trellis
