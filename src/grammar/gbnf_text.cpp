#include "grammar/gbnf_text.h"

#include <cassert>
#include <cstdio>

#include "base/utf8.h"
#include "grammar/regex_grammar.h"

namespace trellis {

namespace gbnf_text_impl {
namespace {

// One code point inside a GBNF class. Printable ASCII stays as is except the characters the class
// syntax gives a meaning to; the rest is escaped so the text stays plain ASCII.
std::string class_char(char32_t cp) {
  if (cp == '\\' || cp == ']' || cp == '-') return std::string{'\\', static_cast<char>(cp)};
  const bool special = cp == '[' || cp == '^' || cp == '"';
  if (cp >= 0x20 && cp < 0x7F && !special) return std::string(1, static_cast<char>(cp));
  char text[16];
  if (cp < 0x80) {
    std::snprintf(text, sizeof text, "\\x%02X", static_cast<unsigned>(cp));
  } else if (cp < 0x10000) {
    std::snprintf(text, sizeof text, "\\u%04X", static_cast<unsigned>(cp));
  } else {
    std::snprintf(text, sizeof text, "\\U%08X", static_cast<unsigned>(cp));
  }
  return text;
}

std::string class_body(const CodePointSet& set) {
  std::string body;
  for (const CodePointRange& r : set.ranges()) {
    body += class_char(r.first);
    if (r.last == r.first) continue;
    if (r.last > r.first + 1) body += '-';
    body += class_char(r.last);
  }
  return body;
}

// The hex digits (both cases) whose values are in `nibbles` (a 16-bit mask), as a class.
std::string hex_digit_class(unsigned nibbles) {
  CodePointSet digits;
  for (unsigned v = 0; v < 16; ++v) {
    if (!(nibbles & (1u << v))) continue;
    if (v < 10) {
      digits.add(U'0' + v);
    } else {
      digits.add(U'a' + (v - 10));
      digits.add(U'A' + (v - 10));
    }
  }
  return gbnf_char_class(digits);
}

// The letter after the backslash of JSON's short escape for `cp`, or 0 when it has none.
char short_escape(char32_t cp) {
  switch (cp) {
    case '"':
      return '"';
    case '\\':
      return '\\';
    case '\b':
      return 'b';
    case '\f':
      return 'f';
    case '\n':
      return 'n';
    case '\r':
      return 'r';
    case '\t':
      return 't';
    default:
      return 0;
  }
}

}  // namespace
}  // namespace gbnf_text_impl

std::string gbnf_char_class(const CodePointSet& set) {
  using gbnf_text_impl::class_body;
  assert(!set.empty());
  const CodePointSet others = set.complement();
  if (others.empty()) return ".";
  std::string positive = "[" + class_body(set) + "]";
  std::string negative = "[^" + class_body(others) + "]";
  return negative.size() < positive.size() ? negative : positive;
}

std::string json_char_gbnf(const CodePointSet& set) {
  using namespace gbnf_text_impl;
  assert(!set.empty());
  std::vector<std::string> alternatives;

  CodePointSet raw = set;
  raw.remove_range(0, 0x1F);
  raw.remove_range('"', '"');
  raw.remove_range('\\', '\\');
  if (!raw.empty()) alternatives.push_back(gbnf_char_class(raw));

  // Characters JSON must escape: the short escapes as one backslash-and-class, the other control
  // characters as \u00XX with the two last hex digits as classes.
  CodePointSet short_letters;
  unsigned long_nibbles[2] = {0, 0};  // by the high nibble of the code point (0 or 1)
  for (const CodePointRange& r : set.ranges()) {
    for (char32_t cp = r.first; cp <= r.last && cp < 0x20; ++cp) {
      if (char letter = short_escape(cp)) {
        short_letters.add(static_cast<char32_t>(letter));
      } else {
        long_nibbles[cp >> 4] |= 1u << (cp & 0xF);
      }
    }
    if (r.first <= '"' && '"' <= r.last) short_letters.add('"');
    if (r.first <= '\\' && '\\' <= r.last) short_letters.add('\\');
  }
  if (!short_letters.empty()) {
    const long single = short_letters.single();
    alternatives.push_back(single >= 0 ? gbnf_literal(std::string{'\\', static_cast<char>(single)})
                                       : "\"\\\\\" " + gbnf_char_class(short_letters));
  }
  std::vector<std::string> long_forms;
  for (unsigned high = 0; high < 2; ++high) {
    if (long_nibbles[high] == 0) continue;
    long_forms.push_back(std::string("\"") + static_cast<char>('0' + high) + "\" " +
                         hex_digit_class(long_nibbles[high]));
  }
  if (!long_forms.empty()) alternatives.push_back("\"\\\\u00\" " + gbnf_alternation(long_forms));
  return gbnf_alternation(alternatives);
}

std::string json_escaped_char(char32_t cp) {
  if (char letter = gbnf_text_impl::short_escape(cp)) return std::string{'\\', letter};
  if (cp < 0x20) {
    char text[8];
    std::snprintf(text, sizeof text, "\\u%04x", static_cast<unsigned>(cp));
    return text;
  }
  return encode_utf8(cp);
}

std::string gbnf_alternation(const std::vector<std::string>& alternatives) {
  assert(!alternatives.empty());
  if (alternatives.size() == 1) return alternatives[0];
  std::string text = "( ";
  for (size_t i = 0; i < alternatives.size(); ++i) {
    if (i > 0) text += " | ";
    text += alternatives[i];
  }
  return text + " )";
}

}  // namespace trellis
