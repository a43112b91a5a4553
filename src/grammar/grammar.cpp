#include "grammar/grammar.h"

#include <bit>
#include <cstdio>

namespace trellis {

int ByteSet::count() const {
  int n = 0;
  for (uint64_t word : words) n += std::popcount(word);
  return n;
}

uint8_t ByteSet::single() const {
  for (int b = 0; b < 256; ++b)
    if (contains(static_cast<uint8_t>(b))) return static_cast<uint8_t>(b);
  return 0;
}

namespace {

std::string byte_text(int byte) {
  if (byte >= 0x21 && byte < 0x7f && byte != '\\' && byte != ']' && byte != '-')
    return std::string(1, static_cast<char>(byte));
  char text[8];
  std::snprintf(text, sizeof text, "\\x%02X", byte);
  return text;
}

// "[a-z0-9_]" style, ranges of consecutive members merged.
std::string byte_set_text(const ByteSet& set) {
  std::string text = "[";
  for (int b = 0; b < 256;) {
    if (!set.contains(static_cast<uint8_t>(b))) {
      ++b;
      continue;
    }
    int last = b;
    while (last + 1 < 256 && set.contains(static_cast<uint8_t>(last + 1))) ++last;
    text += byte_text(b);
    if (last > b) text += "-" + byte_text(last);
    b = last + 1;
  }
  return text + "]";
}

}  // namespace

std::string Grammar::to_string() const {
  std::string text;
  for (const GrammarRule& rule : rules) {
    text += rule.name + " ::=";
    for (size_t a = 0; a < rule.alternatives.size(); ++a) {
      if (a > 0) text += " |";
      for (uint32_t i = rule.alternatives[a]; elements[i].kind != ElementKind::END; ++i) {
        const GrammarElement& element = elements[i];
        text += " ";
        text += element.kind == ElementKind::BYTES ? byte_set_text(byte_sets[element.value])
                                                   : rules[element.value].name;
      }
    }
    text += "\n";
  }
  return text;
}

}  // namespace trellis
