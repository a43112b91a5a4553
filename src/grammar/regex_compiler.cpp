#include "grammar/regex_compiler.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/utf8.h"
#include "grammar/code_point_set.h"
#include "grammar/gbnf_text.h"
#include "grammar/regex_grammar.h"

namespace trellis {

namespace regex_compiler_impl {
namespace {

// Groups nested deeper than this are refused, so that the recursive descent stays shallow.
constexpr int kMaxGroupNesting = 256;
// Counts in {m,n} are read up to here (past it they are refused by the limit check anyway).
constexpr int64_t kCountCap = int64_t{1} << 40;

// A GBNF expression for part of the pattern. An empty `gbnf` is the empty string (it matches only
// ""); GBNF has no token for that, so the empty case is kept apart until it is written out.
struct Expr {
  std::string gbnf;
  bool primary = false;  // one token (literal, class, rule name or group): a suffix binds to all
  bool literal = false;  // gbnf is the literal of `bytes`, so that neighbours can join it
  std::string bytes;

  bool empty() const { return gbnf.empty(); }
};

Expr literal_expr(std::string bytes) {
  Expr e;
  e.gbnf = gbnf_literal(bytes);
  e.primary = true;
  e.literal = true;
  e.bytes = std::move(bytes);
  return e;
}

struct Quantifier {
  int64_t min = 1;
  int64_t max = 1;  // -1: unbounded
};

// One item of a class: a single character (which may start or end a range) or a shorthand set.
struct ClassAtom {
  CodePointSet set;
  bool single = false;
  char32_t cp = 0;
};

CodePointSet digit_set() {
  return CodePointSet::range('0', '9');
}

CodePointSet word_set() {
  CodePointSet set = CodePointSet::range('a', 'z');
  set.add_range('A', 'Z');
  set.add_range('0', '9');
  set.add('_');
  return set;
}

CodePointSet space_set() {
  CodePointSet set;
  // ECMAScript's \s: white space and line terminators.
  for (char32_t cp : {U' ', U'\t', U'\n', U'\r', U'\f', U'\v', U'\u00A0', U'\u1680', U'\u2028',
                      U'\u2029', U'\u202F', U'\u205F', U'\u3000', U'\uFEFF'})
    set.add(cp);
  set.add_range(U'\u2000', U'\u200A');
  return set;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class RegexCompiler {
 public:
  RegexCompiler(std::string_view pattern, std::string_view rule_name, RegexTarget target,
                RegexMatch match, const GrammarLimits& limits)
      : pattern_(pattern), rule_name_(rule_name), target_(target), match_(match), limits_(limits) {}

  Result<std::string> compile() {
    if (!is_valid_utf8(pattern_)) return Error{"regex: the pattern is not valid UTF-8"};
    std::vector<Expr> alternatives;
    TRELLIS_ASSIGN(alternatives, parse_top());
    Expr body = alternation(std::move(alternatives));
    std::string text = rule_name_ + " ::= " + (body.empty() ? "\"\"" : body.gbnf) + "\n";
    for (const auto& [name, rule_body] : helpers_) text += name + " ::= " + rule_body + "\n";
    if (static_cast<int64_t>(text.size()) > limits_.max_gbnf_bytes)
      return Error{"regex: the grammar for the pattern exceeds " +
                   std::to_string(limits_.max_gbnf_bytes) + " bytes"};
    return text;
  }

 private:
  bool at_end() const { return pos_ >= pattern_.size(); }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < pattern_.size() ? pattern_[pos_ + ahead] : '\0';
  }

  Error error(const std::string& what, size_t offset) const {
    return Error{"regex: " + what + " at offset " + std::to_string(offset)};
  }
  Error unsupported(const std::string& construct, size_t offset) const {
    return error("unsupported construct '" + construct + "'", offset);
  }

  // The top level: alternatives that may each open with ^ and close with $.
  Result<std::vector<Expr>> parse_top() {
    std::vector<Expr> alternatives;
    for (;;) {
      const bool anchored_start = peek() == '^';
      if (anchored_start) ++pos_;
      Expr body;
      TRELLIS_ASSIGN(body, parse_sequence(0));
      const bool anchored_end = peek() == '$';
      if (anchored_end) ++pos_;
      alternatives.push_back(search_padding(std::move(body), anchored_start, anchored_end));
      if (at_end()) return alternatives;
      if (peek() == ')') return error("unmatched ')'", pos_);
      ++pos_;  // '|'
    }
  }

  // SEARCH semantics: an unanchored side may have any text there.
  Expr search_padding(Expr body, bool anchored_start, bool anchored_end) {
    if (match_ == RegexMatch::WHOLE || (anchored_start && anchored_end)) return body;
    const Expr any = quantify(set_expr(CodePointSet::all()), {0, -1});
    std::vector<Expr> items;
    if (!anchored_start) items.push_back(any);
    items.push_back(std::move(body));
    if (!anchored_end) items.push_back(any);
    return sequence(std::move(items));
  }

  Result<Expr> parse_alternation(int depth) {
    std::vector<Expr> alternatives;
    for (;;) {
      Expr e;
      TRELLIS_ASSIGN(e, parse_sequence(depth));
      alternatives.push_back(std::move(e));
      if (peek() != '|') return alternation(std::move(alternatives));
      ++pos_;
    }
  }

  // Items up to '|', ')' or the end; at depth 0 also up to a '$' that ends the alternative.
  Result<Expr> parse_sequence(int depth) {
    std::vector<Expr> items;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        const bool closes = depth == 0 && (pos_ + 1 == pattern_.size() || peek(1) == '|');
        if (closes) break;
        return unsupported("anchor $ before the end", pos_);
      }
      Expr atom;
      TRELLIS_ASSIGN(atom, parse_atom(depth));
      std::optional<Quantifier> q;
      TRELLIS_ASSIGN(q, parse_quantifier());
      if (q) {
        std::optional<Quantifier> again;
        const size_t at = pos_;
        TRELLIS_ASSIGN(again, parse_quantifier());
        if (again) return error("nothing to repeat", at);
        atom = quantify(std::move(atom), *q);
      }
      items.push_back(std::move(atom));
    }
    return sequence(std::move(items));
  }

  Result<Expr> parse_atom(int depth) {
    const size_t start = pos_;
    const char c = peek();
    switch (c) {
      case '(':
        return parse_group(depth);
      case '[': {
        CodePointSet set;
        TRELLIS_ASSIGN(set, parse_class());
        return set_expr(set);
      }
      case '.': {
        ++pos_;
        CodePointSet set = CodePointSet::all();
        // ECMAScript's `.`: anything but a line terminator.
        set.remove_range('\n', '\n');
        set.remove_range('\r', '\r');
        set.remove_range(U'\u2028', U'\u2029');
        return set_expr(set);
      }
      case '\\': {
        ClassAtom atom;
        TRELLIS_ASSIGN(atom, parse_escape(false));
        return set_expr(atom.set);
      }
      case '^':
        return unsupported("anchor ^ after the start", start);
      case '*':
      case '+':
      case '?':
        return error("nothing to repeat", start);
      case '{': {
        std::optional<Quantifier> q;
        TRELLIS_ASSIGN(q, parse_quantifier());
        if (q) return error("nothing to repeat", start);
        ++pos_;  // not a quantifier: a literal '{', as ECMAScript's Annex B reads it
        return set_expr(CodePointSet::of('{'));
      }
      default:
        break;
    }
    return set_expr(CodePointSet::of(decode_utf8(pattern_, pos_)));
  }

  Result<Expr> parse_group(int depth) {
    const size_t start = pos_;
    if (depth + 1 > kMaxGroupNesting)
      return error("groups nested deeper than " + std::to_string(kMaxGroupNesting), start);
    ++pos_;  // (
    if (peek() == '?') {
      const std::string_view rest = pattern_.substr(pos_);
      if (rest.starts_with("?:")) {
        pos_ += 2;
      } else if (rest.starts_with("?=") || rest.starts_with("?!")) {
        return unsupported(std::string("lookahead (") + std::string(rest.substr(0, 2)), start);
      } else if (rest.starts_with("?<=") || rest.starts_with("?<!")) {
        return unsupported(std::string("lookbehind (") + std::string(rest.substr(0, 3)), start);
      } else if (rest.starts_with("?<") || rest.starts_with("?P<")) {
        return unsupported("named group (?<", start);
      } else {
        return unsupported("group modifier (" + std::string(rest.substr(0, 2)), start);
      }
    }
    Expr inner;
    TRELLIS_ASSIGN(inner, parse_alternation(depth + 1));
    if (peek() != ')') return error("unterminated group", start);
    ++pos_;
    if (inner.empty() || inner.primary) return inner;
    Expr group;
    group.gbnf = "( " + inner.gbnf + " )";
    group.primary = true;
    return group;
  }

  // A quantifier at pos_ (consumed with its lazy '?'), or nothing. A '{' that does not form
  // {m}, {m,} or {m,n} is not a quantifier.
  Result<std::optional<Quantifier>> parse_quantifier() {
    const size_t start = pos_;
    Quantifier q;
    switch (peek()) {
      case '*':
        q = {0, -1};
        ++pos_;
        break;
      case '+':
        q = {1, -1};
        ++pos_;
        break;
      case '?':
        q = {0, 1};
        ++pos_;
        break;
      case '{': {
        std::optional<Quantifier> braces = parse_braces();
        if (!braces) return std::optional<Quantifier>();
        q = *braces;
        if (q.max >= 0 && q.max < q.min)
          return error("quantifier {" + std::to_string(q.min) + "," + std::to_string(q.max) +
                           "} out of order",
                       start);
        break;
      }
      default:
        return std::optional<Quantifier>();
    }
    const int64_t largest = std::max(q.min, q.max);
    if (largest > limits_.max_elements)
      return error("repetition count " + std::to_string(largest) + " exceeds the grammar limits",
                   start);
    if (peek() == '?') ++pos_;  // lazy: the same language
    return std::optional<Quantifier>(q);
  }

  // {m}, {m,} or {m,n} at pos_, consumed; nothing (pos_ unchanged) when the text is not one.
  std::optional<Quantifier> parse_braces() {
    size_t i = pos_ + 1;
    auto number = [&](int64_t& out) {
      const size_t first = i;
      out = 0;
      while (i < pattern_.size() && pattern_[i] >= '0' && pattern_[i] <= '9') {
        out = std::min(kCountCap, out * 10 + (pattern_[i] - '0'));
        ++i;
      }
      return i > first;
    };
    Quantifier q;
    if (!number(q.min)) return std::nullopt;
    q.max = q.min;
    if (i < pattern_.size() && pattern_[i] == ',') {
      ++i;
      if (!number(q.max)) q.max = -1;
    }
    if (i >= pattern_.size() || pattern_[i] != '}') return std::nullopt;
    pos_ = i + 1;
    return q;
  }

  Result<CodePointSet> parse_class() {
    const size_t start = pos_;
    ++pos_;  // [
    const bool negated = peek() == '^';
    if (negated) ++pos_;
    CodePointSet set;
    while (peek() != ']') {
      if (at_end()) return error("unterminated class", start);
      ClassAtom first;
      TRELLIS_ASSIGN(first, parse_class_atom());
      if (peek() != '-' || peek(1) == ']' || pos_ + 1 >= pattern_.size()) {
        set.add(first.set);
        continue;
      }
      const size_t dash = pos_;
      ++pos_;
      ClassAtom last;
      TRELLIS_ASSIGN(last, parse_class_atom());
      if (!first.single || !last.single) return unsupported("class range with a shorthand", dash);
      if (last.cp < first.cp) return error("class range out of order", dash);
      set.add_range(first.cp, last.cp);
    }
    ++pos_;  // ]
    if (negated) set = set.complement();
    if (set.empty()) return unsupported("class that matches nothing", start);
    return set;
  }

  Result<ClassAtom> parse_class_atom() {
    if (peek() == '\\') return parse_escape(true);
    return single(decode_utf8(pattern_, pos_));
  }

  static ClassAtom single(char32_t cp) {
    ClassAtom atom;
    atom.set = CodePointSet::of(cp);
    atom.single = true;
    atom.cp = cp;
    return atom;
  }
  static ClassAtom shorthand(CodePointSet set, bool negated) {
    ClassAtom atom;
    atom.set = negated ? set.complement() : std::move(set);
    return atom;
  }

  // An escape at pos_ (the backslash); `in_class` reads \b as a backspace.
  Result<ClassAtom> parse_escape(bool in_class) {
    const size_t start = pos_;
    ++pos_;
    if (at_end()) return error("trailing backslash", start);
    const char c = peek();
    ++pos_;
    switch (c) {
      case 'd':
        return shorthand(digit_set(), false);
      case 'D':
        return shorthand(digit_set(), true);
      case 'w':
        return shorthand(word_set(), false);
      case 'W':
        return shorthand(word_set(), true);
      case 's':
        return shorthand(space_set(), false);
      case 'S':
        return shorthand(space_set(), true);
      case 'n':
        return single('\n');
      case 't':
        return single('\t');
      case 'r':
        return single('\r');
      case 'f':
        return single('\f');
      case 'v':
        return single('\v');
      case 'x':
        return parse_hex_escape(2, start);
      case 'u':
        return parse_unicode_escape(start);
      case 'c': {
        const char letter = peek();
        if (!((letter >= 'a' && letter <= 'z') || (letter >= 'A' && letter <= 'Z')))
          return error("malformed \\c escape", start);
        ++pos_;
        return single(static_cast<char32_t>(letter % 32));
      }
      case '0':
        if (peek() >= '0' && peek() <= '9') return unsupported("octal escape", start);
        return single(0);
      case 'b':
        if (in_class) return single('\b');
        return unsupported("word boundary \\b", start);
      case 'B':
        return unsupported("word boundary \\B", start);
      case 'k':
        return unsupported("backreference \\k", start);
      case 'p':
      case 'P':
        return unsupported(std::string("Unicode property class \\") + c, start);
      default:
        break;
    }
    if (c >= '1' && c <= '9') return unsupported(std::string("backreference \\") + c, start);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
      return unsupported(std::string("escape \\") + c, start);
    --pos_;  // an escaped punctuation character (or any other): itself
    return single(decode_utf8(pattern_, pos_));
  }

  Result<ClassAtom> parse_hex_escape(int digits, size_t start) {
    int value = 0;
    for (int i = 0; i < digits; ++i) {
      const int v = hex_value(peek());
      if (v < 0) return error("malformed hex escape", start);
      value = value * 16 + v;
      ++pos_;
    }
    return single(static_cast<char32_t>(value));
  }

  // \uHHHH, with a surrogate pair \uD83D\uDE00 read as the one character it encodes.
  Result<ClassAtom> parse_unicode_escape(size_t start) {
    if (peek() == '{') return unsupported("\\u{...}", start);
    ClassAtom high;
    TRELLIS_ASSIGN(high, parse_hex_escape(4, start));
    if (high.cp < 0xD800 || high.cp > 0xDFFF) return high;
    if (high.cp <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {
      pos_ += 2;
      ClassAtom low;
      TRELLIS_ASSIGN(low, parse_hex_escape(4, start));
      if (low.cp >= 0xDC00 && low.cp <= 0xDFFF)
        return single(0x10000 + ((high.cp - 0xD800) << 10) + (low.cp - 0xDC00));
    }
    return unsupported("lone surrogate", start);
  }

  // One character of `set` in the target's encoding.
  Expr set_expr(const CodePointSet& set) {
    const long only = set.single();
    if (target_ == RegexTarget::TEXT) {
      if (only >= 0) return literal_expr(encode_utf8(static_cast<char32_t>(only)));
      Expr e;
      e.gbnf = gbnf_char_class(set);
      e.primary = true;
      return e;
    }
    // A control character without a short escape goes through the class below, which accepts
    // its \u00XX escape in either letter case.
    if (only >= 0) {
      std::string bytes = json_escaped_char(static_cast<char32_t>(only));
      if (only >= 0x20 || bytes.size() == 2) return literal_expr(std::move(bytes));
    }
    Expr e;
    e.primary = true;
    e.gbnf = json_char_gbnf(set);
    if (e.gbnf != gbnf_char_class(set)) e.gbnf = helper_rule(e.gbnf);
    return e;
  }

  // A rule for `body`, shared by every class with the same text.
  std::string helper_rule(const std::string& body) {
    auto [it, added] = helper_names_.try_emplace(body, "");
    if (added) {
      it->second = rule_name_ + "-c" + std::to_string(helper_names_.size());
      helpers_.emplace_back(it->second, body);
    }
    return it->second;
  }

  static Expr quantify(Expr e, Quantifier q) {
    if (e.empty() || (q.min == 1 && q.max == 1)) return e;
    if (q.max == 0) return Expr{};
    std::string suffix;
    if (q.min == 0 && q.max == 1) {
      suffix = "?";
    } else if (q.min == 0 && q.max < 0) {
      suffix = "*";
    } else if (q.min == 1 && q.max < 0) {
      suffix = "+";
    } else if (q.min == q.max) {
      suffix = "{" + std::to_string(q.min) + "}";
    } else {
      suffix = "{" + std::to_string(q.min) + "," + (q.max < 0 ? "" : std::to_string(q.max)) + "}";
    }
    Expr out;
    out.gbnf = (e.primary ? e.gbnf : "( " + e.gbnf + " )") + suffix;
    return out;
  }

  // Concatenation; adjacent literals become one, empty items vanish.
  static Expr sequence(std::vector<Expr> items) {
    std::vector<Expr> kept;
    for (Expr& item : items) {
      if (item.empty()) continue;
      if (item.literal && !kept.empty() && kept.back().literal) {
        kept.back() = literal_expr(kept.back().bytes + item.bytes);
      } else {
        kept.push_back(std::move(item));
      }
    }
    if (kept.empty()) return Expr{};
    if (kept.size() == 1) return std::move(kept[0]);
    Expr out;
    for (const Expr& item : kept) out.gbnf += (out.gbnf.empty() ? "" : " ") + item.gbnf;
    return out;
  }

  // Alternatives; an empty one makes the rest optional.
  static Expr alternation(std::vector<Expr> alternatives) {
    std::vector<Expr> kept;
    bool has_empty = false;
    for (Expr& alternative : alternatives) {
      if (alternative.empty()) {
        has_empty = true;
      } else {
        kept.push_back(std::move(alternative));
      }
    }
    if (kept.empty()) return Expr{};
    Expr out;
    if (kept.size() == 1) {
      out = std::move(kept[0]);
    } else {
      for (const Expr& alternative : kept)
        out.gbnf += (out.gbnf.empty() ? "" : " | ") + alternative.gbnf;
    }
    return has_empty ? quantify(std::move(out), {0, 1}) : out;
  }

  std::string_view pattern_;
  std::string rule_name_;
  RegexTarget target_;
  RegexMatch match_;
  GrammarLimits limits_;
  size_t pos_ = 0;
  std::map<std::string, std::string> helper_names_;           // rule body -> helper rule name
  std::vector<std::pair<std::string, std::string>> helpers_;  // (name, body), in creation order
};

}  // namespace
}  // namespace regex_compiler_impl

Result<std::string> compile_regex(std::string_view pattern, std::string_view rule_name,
                                  RegexTarget target, RegexMatch match,
                                  const GrammarLimits& limits) {
  return regex_compiler_impl::RegexCompiler(pattern, rule_name, target, match, limits).compile();
}

}  // namespace trellis
