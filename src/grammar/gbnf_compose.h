// Putting GBNF grammars together: several compiled schemas in one grammar (a tool call's
// arguments, one schema per function), and free text that stops short of a marker (the text
// before a tool call).
#pragma once

#include <string>
#include <string_view>

namespace trellis {

// `gbnf` with every rule name (definitions and references) prefixed with `prefix`, so that it can
// be appended to another grammar: its `root` becomes `prefix` + "root". Literals, classes and
// comments are left as they are.
std::string prefix_gbnf_rules(std::string_view gbnf, std::string_view prefix);

// Rules defining `rule_name` as any text (whole UTF-8 characters) in which `marker` (not empty)
// does not occur, the empty text included. Its states follow the marker's failure function (as
// in KMP string search), so the grammar is unambiguous and its automaton small.
std::string text_without_gbnf(std::string_view marker, std::string_view rule_name);

}  // namespace trellis
