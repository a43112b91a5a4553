#include "grammar/json_schema_grammar.h"

#include "grammar/json_schema_compiler.h"
#include "grammar/json_value_rules.h"

namespace trellis {

Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema,
                                        const JsonGrammarOptions& options) {
  return JsonSchemaCompiler(schema, options).compile();
}

Result<std::string> json_schema_to_gbnf(const nlohmann::json& schema,
                                        const JsonGrammarOptions& options) {
  // nlohmann::json keeps object keys sorted; the properties then come in that order.
  const nlohmann::ordered_json ordered = schema;
  return json_schema_to_gbnf(ordered, options);
}

std::string json_object_gbnf(const JsonGrammarOptions& options) {
  std::string text = "root ::= json-object\n";
  for (const JsonValueRule& rule : json_value_rules(options.whitespace))
    text += rule.name + " ::= " + rule.body + "\n";
  return text;
}

}  // namespace trellis
