// A context-free grammar over bytes: what every constraint (GBNF, JSON schema, regex, choice)
// compiles to, and what the GrammarAutomaton runs.
//
// Layout: every alternative of every rule is a run of elements in `elements`, closed by an END
// element; a rule lists where its alternatives start. A BYTES element matches one byte of a set;
// a RULE element matches its rule. Code points are UTF-8 byte sequences here, so a token that ends
// inside a multi-byte character is matched byte by byte like any other.
//
// Invariants after parse_gbnf(): no left recursion, every rule productive (some string matches
// it), every alternative free of unproductive elements, root non-empty as a language.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace trellis {

// A set of byte values, as a 256-bit mask.
struct ByteSet {
  std::array<uint64_t, 4> words{};

  bool contains(uint8_t byte) const { return (words[byte >> 6] >> (byte & 63)) & 1; }
  void add(uint8_t byte) { words[byte >> 6] |= uint64_t{1} << (byte & 63); }
  void add_range(uint8_t first, uint8_t last) {
    for (int b = first; b <= last; ++b) add(static_cast<uint8_t>(b));
  }
  bool empty() const { return (words[0] | words[1] | words[2] | words[3]) == 0; }
  int count() const;
  // The only member, when count() == 1.
  uint8_t single() const;
  bool operator==(const ByteSet&) const = default;
};

enum class ElementKind : uint8_t {
  BYTES,  // value: index into Grammar::byte_sets
  RULE,   // value: index into Grammar::rules
  END,    // closes an alternative; value unused
};

struct GrammarElement {
  ElementKind kind = ElementKind::END;
  uint32_t value = 0;
};

struct GrammarRule {
  std::string name;
  std::vector<uint32_t> alternatives;  // start offsets into Grammar::elements
};

struct Grammar {
  std::vector<ByteSet> byte_sets;
  std::vector<GrammarElement> elements;
  std::vector<GrammarRule> rules;
  uint32_t root = 0;

  // A readable dump (one rule per line, byte sets as ranges), for tests and error messages.
  std::string to_string() const;
};

}  // namespace trellis
