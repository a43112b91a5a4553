#include "tokenizer/unicode_props.h"

#include <algorithm>
#include <iterator>

namespace trellis::unicode {
namespace {

struct CodepointRange {
  uint32_t first;
  uint32_t last;
};
struct CodepointPair {
  uint32_t from;
  uint32_t to;
};
struct Decomposition {
  uint32_t cp;
  uint32_t offset;  // into kDecomposed
  uint32_t length;
};

#include "tokenizer/unicode_tables.inc"

template <size_t N>
bool in_ranges(const CodepointRange (&ranges)[N], uint32_t cp) {
  const auto* it =
      std::upper_bound(std::begin(ranges), std::end(ranges), cp,
                       [](uint32_t c, const CodepointRange& r) { return c < r.first; });
  return it != std::begin(ranges) && cp <= std::prev(it)->last;
}

// Hangul syllables (Unicode's arithmetic): lead, vowel and optional trailing consonant.
constexpr uint32_t kHangulFirst = 0xAC00, kHangulCount = 11172;
constexpr uint32_t kLeadBase = 0x1100, kVowelBase = 0x1161, kTrailBase = 0x11A7;
constexpr uint32_t kVowels = 21, kTrails = 28;

}  // namespace

bool is_nonspacing_mark(uint32_t cp) {
  return in_ranges(kMarks, cp);
}
bool is_punctuation(uint32_t cp) {
  return in_ranges(kPunctuation, cp);
}
bool is_symbol(uint32_t cp) {
  return in_ranges(kSymbols, cp);
}
bool is_control(uint32_t cp) {
  return in_ranges(kControls, cp);
}
bool is_space(uint32_t cp) {
  return (cp >= 0x9 && cp <= 0xD) || in_ranges(kSpaces, cp);
}

uint32_t to_lower(uint32_t cp) {
  const auto* it = std::lower_bound(std::begin(kLowercase), std::end(kLowercase), cp,
                                    [](const CodepointPair& p, uint32_t c) { return p.from < c; });
  return it != std::end(kLowercase) && it->from == cp ? it->to : cp;
}

void append_decomposition(uint32_t cp, std::vector<uint32_t>& out) {
  if (cp >= kHangulFirst && cp < kHangulFirst + kHangulCount) {
    const uint32_t index = cp - kHangulFirst;
    out.push_back(kLeadBase + index / (kVowels * kTrails));
    out.push_back(kVowelBase + index % (kVowels * kTrails) / kTrails);
    if (index % kTrails != 0) out.push_back(kTrailBase + index % kTrails);
    return;
  }
  const auto* it = std::lower_bound(std::begin(kDecompositions), std::end(kDecompositions), cp,
                                    [](const Decomposition& d, uint32_t c) { return d.cp < c; });
  if (it == std::end(kDecompositions) || it->cp != cp) {
    out.push_back(cp);
    return;
  }
  out.insert(out.end(), kDecomposed + it->offset, kDecomposed + it->offset + it->length);
}

}  // namespace trellis::unicode
