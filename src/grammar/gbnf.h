// GBNF (llama.cpp's grammar format) -> Grammar.
//
//   root   ::= object            # a rule: name ::= alternatives; `root` is where matching starts
//   object ::= "{" ws ( pair ( "," ws pair )* )? "}"
//   pair   ::= [a-z]+ ":" [0-9]{1,3} | "\"" [^"\\]* "\""
//
// Literals "..." and classes [...] / [^...] (escapes \n \r \t \\ \" \] \- \xHH \uHHHH \UHHHHHHHH),
// `.` (any code point), groups, alternation, postfix * + ? {m} {m,} {m,n}, `#` comments. A rule
// may span lines; it ends where the next `name ::=` begins. Code points are matched as their
// UTF-8 bytes (the Grammar is over bytes).
#pragma once

#include <string_view>

#include "base/result.h"
#include "grammar/grammar.h"
#include "grammar/grammar_limits.h"

namespace trellis {

// The characters of a rule name: [a-zA-Z0-9_-].
bool is_gbnf_name_char(char c);

// Errors: syntax (with line and column), an undefined rule, no `root` rule, left recursion (named
// rule), an empty language (no string matches root), past `limits`.
Result<Grammar> parse_gbnf(std::string_view text, const GrammarLimits& limits = {});

}  // namespace trellis
