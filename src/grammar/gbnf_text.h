// Writing character sets as GBNF text: as a plain character class, and as the JSON string-content
// encodings of their members (for regexes over JSON strings and for property-name exclusion).
#pragma once

#include <string>
#include <vector>

#include "grammar/code_point_set.h"

namespace trellis {

// `set` (not empty) as one GBNF class matching any one member: "[a-z_]", "[^\n]" (whichever is
// shorter) or "." for every code point.
std::string gbnf_char_class(const CodePointSet& set);

// A GBNF expression matching one member of `set` (not empty) as it is written inside a JSON
// string: the character itself, or where JSON requires an escape (`"`, `\`, below U+0020) the
// short escape (\" \\ \b \f \n \r \t) and otherwise \u00XX. One encoding per character, so that a
// sequence of these has one parse. No top-level '|': alternatives come in parentheses.
std::string json_char_gbnf(const CodePointSet& set);

// The usual JSON string-content spelling of `cp`: the short escape where JSON has one (\" \\ \n
// ...), \u00xx for the other control characters, else its UTF-8 bytes.
std::string json_escaped_char(char32_t cp);

// `alternatives` (not empty) joined by '|', in parentheses when there are several.
std::string gbnf_alternation(const std::vector<std::string>& alternatives);

}  // namespace trellis
