#include "grammar/gbnf.h"

#include <cctype>
#include <string>

#include "base/utf8.h"
#include "grammar/grammar_builder.h"

namespace trellis {

namespace {

using Sequence = GrammarBuilder::Sequence;

class GbnfParser {
 public:
  GbnfParser(std::string_view text, const GrammarLimits& limits) : text_(text), builder_(limits) {}

  Result<Grammar> parse() {
    if (!is_valid_utf8(text_)) return Error{"grammar: the text is not valid UTF-8"};
    skip_space();
    if (at_end()) return error("the grammar is empty");
    while (!at_end()) {
      TRELLIS_TRY(parse_rule());
      skip_space();
    }
    return builder_.finish("root");
  }

 private:
  bool at_end() const { return pos_ >= text_.size(); }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }

  Error error(const std::string& what) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return Error{"grammar: " + what + " at line " + std::to_string(line) + ", column " +
                 std::to_string(column)};
  }

  void skip_space() {
    while (!at_end()) {
      if (std::isspace(static_cast<unsigned char>(peek()))) {
        ++pos_;
      } else if (peek() == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string_view parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_gbnf_name_char(peek())) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  // Whether a `name ::=` starts here (the end of the rule being parsed).
  bool at_rule_start() const {
    size_t i = pos_;
    while (i < text_.size() && is_gbnf_name_char(text_[i])) ++i;
    if (i == pos_) return false;
    while (i < text_.size() && std::isspace(static_cast<unsigned char>(text_[i]))) ++i;
    return text_.substr(i, 3) == "::=";
  }

  Status parse_rule() {
    const std::string name(parse_name());
    if (name.empty()) return error("expected a rule name");
    current_rule_ = name;
    skip_space();
    if (text_.substr(pos_, 3) != "::=") return error("expected '::=' after '" + name + "'");
    pos_ += 3;
    std::vector<Sequence> alternatives;
    TRELLIS_ASSIGN(alternatives, parse_alternatives(0));
    if (Status defined = builder_.define(builder_.rule(name), std::move(alternatives)); !defined)
      return error(defined.error().message);
    return builder_.check_limits();
  }

  Result<std::vector<Sequence>> parse_alternatives(int depth) {
    if (depth > kMaxNesting) return error("groups nested too deeply");
    std::vector<Sequence> alternatives;
    for (;;) {
      Sequence sequence;
      TRELLIS_ASSIGN(sequence, parse_sequence(depth));
      alternatives.push_back(std::move(sequence));
      skip_space();
      if (peek() != '|') return alternatives;
      ++pos_;
    }
  }

  Result<Sequence> parse_sequence(int depth) {
    Sequence sequence;
    for (;;) {
      skip_space();
      if (at_end() || peek() == '|' || peek() == ')' || at_rule_start()) return sequence;
      Sequence item;
      TRELLIS_ASSIGN(item, parse_primary(depth));
      TRELLIS_ASSIGN(item, parse_postfix(std::move(item)));
      sequence.insert(sequence.end(), item.begin(), item.end());
      TRELLIS_TRY(builder_.check_limits());
    }
  }

  Result<Sequence> parse_primary(int depth) {
    const char c = peek();
    if (c == '"') return parse_literal();
    if (c == '[') return parse_class();
    if (c == '.') {
      ++pos_;
      return builder_.code_points({{0, kMaxCodePoint}}, current_rule_);
    }
    if (c == '(') {
      ++pos_;
      std::vector<Sequence> alternatives;
      TRELLIS_ASSIGN(alternatives, parse_alternatives(depth + 1));
      skip_space();
      if (peek() != ')') return error("expected ')'");
      ++pos_;
      if (alternatives.size() == 1) return std::move(alternatives[0]);
      return Sequence{
          {ElementKind::RULE, builder_.helper_rule(current_rule_, std::move(alternatives))}};
    }
    if (is_gbnf_name_char(c)) return Sequence{{ElementKind::RULE, builder_.rule(parse_name())}};
    return error(std::string("unexpected character '") + c + "'");
  }

  Result<Sequence> parse_postfix(Sequence item) {
    for (;;) {
      const char c = peek();
      int64_t min = 0, max = -1;
      if (c == '*') {
        ++pos_;
      } else if (c == '+') {
        ++pos_;
        min = 1;
      } else if (c == '?') {
        ++pos_;
        max = 1;
      } else if (c == '{') {
        TRELLIS_TRY(parse_braces(min, max));
      } else {
        return item;
      }
      Result<Sequence> repeated = builder_.repeat(std::move(item), min, max, current_rule_);
      if (!repeated) return error(repeated.error().message);
      item = std::move(repeated).value();
    }
  }

  // {m}, {m,}, {m,n}
  Status parse_braces(int64_t& min, int64_t& max) {
    ++pos_;
    skip_space();
    TRELLIS_ASSIGN(min, parse_count());
    skip_space();
    max = min;
    if (peek() == ',') {
      ++pos_;
      skip_space();
      max = -1;
      if (peek() != '}') TRELLIS_ASSIGN(max, parse_count());
      skip_space();
    }
    if (peek() != '}') return error("expected '}' to close a repetition");
    ++pos_;
    return {};
  }

  Result<int64_t> parse_count() {
    if (!std::isdigit(static_cast<unsigned char>(peek()))) return error("expected a count");
    int64_t value = 0;
    while (std::isdigit(static_cast<unsigned char>(peek()))) {
      value = value * 10 + (peek() - '0');
      if (value > int64_t{1} << 40) return error("repetition count too large");
      ++pos_;
    }
    return value;
  }

  Result<Sequence> parse_literal() {
    ++pos_;  // the opening quote
    std::string bytes;
    while (peek() != '"') {
      if (at_end()) return error("unterminated string literal");
      uint32_t code_point = 0;
      TRELLIS_ASSIGN(code_point, parse_char());
      bytes += encode_utf8(code_point);
    }
    ++pos_;
    return builder_.literal(bytes);
  }

  Result<Sequence> parse_class() {
    ++pos_;  // [
    const bool negated = peek() == '^';
    if (negated) ++pos_;
    CodePointRanges ranges;
    while (peek() != ']') {
      if (at_end()) return error("unterminated character class");
      uint32_t first = 0, last = 0;
      TRELLIS_ASSIGN(first, parse_char());
      last = first;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
        ++pos_;
        TRELLIS_ASSIGN(last, parse_char());
        if (last < first) return error("character range out of order");
      }
      ranges.push_back({first, last});
    }
    ++pos_;
    ranges = normalize_ranges(std::move(ranges));
    if (negated) ranges = complement_ranges(ranges);
    return builder_.code_points(ranges, current_rule_);
  }

  // One character of a literal or class: an escape or a UTF-8 encoded code point.
  Result<uint32_t> parse_char() {
    if (peek() != '\\') return static_cast<uint32_t>(decode_utf8(text_, pos_));
    ++pos_;
    const char c = peek();
    ++pos_;
    switch (c) {
      case 'n':
        return uint32_t{'\n'};
      case 'r':
        return uint32_t{'\r'};
      case 't':
        return uint32_t{'\t'};
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
      case '^':
      case '/':
        return static_cast<uint32_t>(c);
      case 'x':
        return parse_hex(2);
      case 'u':
        return parse_hex(4);
      case 'U':
        return parse_hex(8);
      default:
        --pos_;
        return error(std::string("unknown escape '\\") + c + "'");
    }
  }

  Result<uint32_t> parse_hex(int digits) {
    uint32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = peek();
      if (!std::isxdigit(static_cast<unsigned char>(c))) return error("expected a hex digit");
      value = value * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(c))
                                                     ? c - '0'
                                                     : std::tolower(c) - 'a' + 10);
      ++pos_;
    }
    if (value > kMaxCodePoint) return error("code point past U+10FFFF");
    return value;
  }

  static constexpr int kMaxNesting = 256;

  std::string_view text_;
  size_t pos_ = 0;
  GrammarBuilder builder_;
  std::string current_rule_;
};

}  // namespace

bool is_gbnf_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
}

Result<Grammar> parse_gbnf(std::string_view text, const GrammarLimits& limits) {
  return GbnfParser(text, limits).parse();
}

}  // namespace trellis
