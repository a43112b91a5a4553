// A set of Unicode code points as sorted, disjoint, non-adjacent ranges: the character classes of
// regexes and of JSON string grammars before they are written out as GBNF.
#pragma once

#include <cstddef>
#include <vector>

namespace trellis {

struct CodePointRange {
  char32_t first;
  char32_t last;  // inclusive
  bool operator==(const CodePointRange&) const = default;
};

class CodePointSet {
 public:
  static constexpr char32_t kMax = 0x10FFFF;

  CodePointSet() = default;
  static CodePointSet of(char32_t cp) { return range(cp, cp); }
  static CodePointSet range(char32_t first, char32_t last);
  // Every scalar value: [0, 0x10FFFF] without the surrogates, which UTF-8 cannot carry.
  static CodePointSet all();

  void add(char32_t cp) { add_range(cp, cp); }
  void add_range(char32_t first, char32_t last);  // first <= last <= kMax
  void add(const CodePointSet& other);
  void remove_range(char32_t first, char32_t last);
  void remove(const CodePointSet& other);
  // all() minus this set.
  CodePointSet complement() const;

  bool contains(char32_t cp) const;
  bool empty() const { return ranges_.empty(); }
  // The only member, or -1 when the set has none or several.
  long single() const;
  const std::vector<CodePointRange>& ranges() const { return ranges_; }
  bool operator==(const CodePointSet&) const = default;

 private:
  std::vector<CodePointRange> ranges_;  // sorted by first; disjoint and non-adjacent
};

}  // namespace trellis
