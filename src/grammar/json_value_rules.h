// The GBNF rules for unconstrained JSON (any value, object, array, string, number) that every JSON
// grammar shares, in either whitespace style.
#pragma once

#include <string>
#include <vector>

#include "grammar/json_schema_grammar.h"

namespace trellis {

struct JsonValueRule {
  std::string name;
  std::string body;
  std::vector<std::string> uses;  // the other shared rules the body names
};

// All the shared rules: ws (FLEXIBLE only), json-value, json-object, json-member, json-array,
// json-string, json-char, json-unicode, json-number, json-integer, json-natural.
//   json-char     one character of a JSON string: any but `"`, `\` and controls, or an escape;
//                 \u escapes of surrogates only as a high-low pair (what strict parsers accept)
//   json-number   JSON's number syntax: no leading zeros, optional fraction and exponent
//   ws            nothing, a space, or one or two newlines then up to 20 spaces or tabs (an
//                 indent): bounded, so a sampler cannot emit whitespace forever
std::vector<JsonValueRule> json_value_rules(JsonWhitespace whitespace);

// " ws " in the FLEXIBLE style, " " in the COMPACT one: what goes between two structural tokens.
const char* json_ws_separator(JsonWhitespace whitespace);

}  // namespace trellis
