#include "grammar/gbnf_compose.h"

#include <cctype>
#include <set>
#include <vector>

#include "base/utf8.h"
#include "grammar/code_point_set.h"
#include "grammar/gbnf.h"
#include "grammar/gbnf_text.h"
#include "grammar/regex_grammar.h"

namespace trellis {

namespace {

// The end of the quoted literal or class that starts at `begin` (its closing character included).
size_t skip_quoted(std::string_view text, size_t begin, char close) {
  size_t i = begin + 1;
  while (i < text.size() && text[i] != close) i += text[i] == '\\' ? 2 : 1;
  return std::min(i + 1, text.size());
}

}  // namespace

std::string prefix_gbnf_rules(std::string_view gbnf, std::string_view prefix) {
  std::string out;
  for (size_t i = 0; i < gbnf.size();) {
    const char c = gbnf[i];
    if (c == '"' || c == '[') {
      const size_t end = skip_quoted(gbnf, i, c == '"' ? '"' : ']');
      out.append(gbnf.substr(i, end - i));
      i = end;
    } else if (c == '#') {
      const size_t end = std::min(gbnf.find('\n', i), gbnf.size());
      out.append(gbnf.substr(i, end - i));
      i = end;
    } else if (is_gbnf_name_char(c)) {
      // A name, or a repetition count inside {m,n} (digits only: left alone).
      size_t end = i;
      while (end < gbnf.size() && is_gbnf_name_char(gbnf[end])) ++end;
      const std::string_view word = gbnf.substr(i, end - i);
      const bool count = word.find_first_not_of("0123456789") == std::string_view::npos;
      if (!count) out.append(prefix);
      out.append(word);
      i = end;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

std::string text_without_gbnf(std::string_view marker, std::string_view rule_name) {
  // The marker's characters and its KMP failure function over them.
  std::vector<char32_t> chars;
  for (size_t pos = 0; pos < marker.size();) chars.push_back(decode_utf8(marker, pos));
  const size_t m = chars.size();
  std::vector<size_t> fail(m + 1, 0);
  for (size_t i = 1, k = 0; i < m; ++i) {
    while (k > 0 && chars[i] != chars[k]) k = fail[k];
    if (chars[i] == chars[k]) ++k;
    fail[i + 1] = k;
  }
  // next(state, c): the matched prefix length after c, from a state with `state` characters
  // matched.
  auto next = [&](size_t state, char32_t c) {
    while (state > 0 && chars[state] != c) state = fail[state];
    return chars[state] == c ? state + 1 : 0;
  };
  const std::set<char32_t> distinct(chars.begin(), chars.end());
  CodePointSet others = CodePointSet::all();
  for (char32_t c : distinct) others.remove_range(c, c);

  const std::string name(rule_name);
  auto state_name = [&](size_t state) {
    return name + (state == 0 ? "" : "-s" + std::to_string(state));
  };
  std::string out;
  for (size_t state = 0; state < m; ++state) {
    // Each rule: end here, or one more character and the state it leads to (never state m).
    out += state_name(state) + " ::= \"\"";
    for (char32_t c : distinct) {
      const size_t to = next(state, c);
      if (to == m) continue;
      out += " | " + gbnf_literal(encode_utf8(c)) + " " + state_name(to);
    }
    if (!others.empty()) out += " | " + gbnf_char_class(others) + " " + state_name(0);
    out += "\n";
  }
  return out;
}

}  // namespace trellis
