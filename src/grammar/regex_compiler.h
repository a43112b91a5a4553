// The regex -> GBNF compiler behind regex_to_gbnf() and JSON Schema's `pattern`: one parser, two
// targets (plain text, or the inside of a JSON string) and two match semantics.
#pragma once

#include <string_view>

#include "base/result.h"
#include "grammar/grammar_limits.h"

namespace trellis {

enum class RegexTarget {
  TEXT,         // the matched characters as they are (UTF-8)
  JSON_STRING,  // the characters as written between the quotes of a JSON string (json_char_gbnf)
};

enum class RegexMatch {
  WHOLE,   // the whole text matches: a leading ^ and trailing $ are no-ops
  SEARCH,  // some substring matches, as JSON Schema's `pattern` (ECMAScript `test`): an
           // alternative without ^ may have anything before it, one without $ anything after it
};

// GBNF rules defining `rule_name` for `pattern` (syntax: see regex_grammar.h; ^ may also open and
// $ close each top-level alternative). Helper rules are named `rule_name` + "-" + a suffix.
Result<std::string> compile_regex(std::string_view pattern, std::string_view rule_name,
                                  RegexTarget target, RegexMatch match,
                                  const GrammarLimits& limits);

}  // namespace trellis
