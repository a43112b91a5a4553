// Code point ranges -> the UTF-8 byte-range sequences that match exactly their encodings, so a
// character class over code points becomes a few alternatives of byte sets.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace trellis {

struct ByteRange {
  uint8_t first = 0;
  uint8_t last = 0;
};
// One alternative: byte i of a matching encoding lies in ranges[i].
using Utf8Sequence = std::vector<ByteRange>;

// The largest code point; surrogates (U+D800..U+DFFF) are never matched.
inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// Sequences matching exactly the UTF-8 encodings of the code points in [first, last] (surrogates
// left out). Disjoint; each sequence has one length.
std::vector<Utf8Sequence> utf8_sequences(uint32_t first, uint32_t last);

// Sorted, merged, non-overlapping intervals; complement over [0, kMaxCodePoint].
using CodePointRanges = std::vector<std::pair<uint32_t, uint32_t>>;
CodePointRanges normalize_ranges(CodePointRanges ranges);
CodePointRanges complement_ranges(const CodePointRanges& normalized);

}  // namespace trellis
