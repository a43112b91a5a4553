#include "grammar/regex_grammar.h"

#include <cassert>
#include <cstdio>
#include <set>

#include "grammar/regex_compiler.h"

namespace trellis {

Result<std::string> regex_to_gbnf(std::string_view pattern, std::string_view rule_name,
                                  const GrammarLimits& limits) {
  return compile_regex(pattern, rule_name, RegexTarget::TEXT, RegexMatch::WHOLE, limits);
}

std::string choice_gbnf(std::span<const std::string> choices) {
  assert(!choices.empty());
  // Equal choices are written once: a duplicate alternative would only make the grammar
  // ambiguous.
  std::set<std::string_view> seen;
  std::string text = "root ::=";
  for (const std::string& choice : choices) {
    if (!seen.insert(choice).second) continue;
    text += (seen.size() == 1 ? " " : " | ") + gbnf_literal(choice);
  }
  return text + "\n";
}

std::string gbnf_literal(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7F) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02X", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace trellis
