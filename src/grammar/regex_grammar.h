// Regular expressions -> GBNF, for the `regex` request field and JSON Schema's `pattern`.
//
// The accepted syntax (ECMAScript-like, as JSON Schema uses): literals and escapes (\n \t \r,
// \\ \. \xHH \uHHHH and the other escaped metacharacters), `.` (any character but a line
// terminator: \n, \r, U+2028, U+2029), classes [...] and [^...] with ranges and the shorthands
// \d \w \s \D \W \S (inside and outside classes; \s as ECMAScript's), groups ( ) and (?: ),
// alternation |, quantifiers * + ? {m} {m,} {m,n} (a lazy `?` suffix is accepted and means the same
// here), anchors ^ at the start and $ at the end of the pattern or of one of its top-level
// alternatives (the whole output must match: the pattern is implicitly anchored, so these anchors
// change nothing). A `{` that does not open a quantifier is a literal, as in ECMAScript's Annex B.
// Anything else (backreferences, lookaround, named groups, \b, Unicode property classes, anchors
// elsewhere) is refused by name.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "base/result.h"
#include "grammar/grammar_limits.h"

namespace trellis {

// GBNF rules defining `rule_name` as the language of `pattern` (the whole string must match).
// Helper rules it needs are named `rule_name` + "-" + something, so several regexes can share one
// grammar text. Errors name the unsupported construct and its offset in the pattern.
Result<std::string> regex_to_gbnf(std::string_view pattern, std::string_view rule_name,
                                  const GrammarLimits& limits);

// GBNF whose `root` accepts exactly one of `choices` (a literal string each).
std::string choice_gbnf(std::span<const std::string> choices);

// `text` as a GBNF string literal, quotes included ("a\"b" for a"b); bytes >= 0x80 are kept as is
// (the GBNF text is UTF-8), control bytes escaped as \xHH.
std::string gbnf_literal(std::string_view text);

}  // namespace trellis
