#include "grammar/utf8_ranges.h"

#include <algorithm>

namespace trellis {

namespace {

int encoded_length(uint32_t code_point) {
  return code_point < 0x80 ? 1 : code_point < 0x800 ? 2 : code_point < 0x10000 ? 3 : 4;
}

std::vector<uint8_t> encode(uint32_t cp) {
  switch (encoded_length(cp)) {
    case 1:
      return {static_cast<uint8_t>(cp)};
    case 2:
      return {static_cast<uint8_t>(0xC0 | cp >> 6), static_cast<uint8_t>(0x80 | (cp & 0x3F))};
    case 3:
      return {static_cast<uint8_t>(0xE0 | cp >> 12), static_cast<uint8_t>(0x80 | (cp >> 6 & 0x3F)),
              static_cast<uint8_t>(0x80 | (cp & 0x3F))};
    default:
      return {static_cast<uint8_t>(0xF0 | cp >> 18), static_cast<uint8_t>(0x80 | (cp >> 12 & 0x3F)),
              static_cast<uint8_t>(0x80 | (cp >> 6 & 0x3F)),
              static_cast<uint8_t>(0x80 | (cp & 0x3F))};
  }
}

// [first, last] within one encoded length. Splits until every byte position varies independently
// (the lower continuation bytes span their whole 0x80..0xBF range wherever a higher byte varies).
void split_same_length(uint32_t first, uint32_t last, std::vector<Utf8Sequence>& out) {
  const int length = encoded_length(first);
  for (int i = 1; i < length; ++i) {
    const uint32_t low_mask = (uint32_t{1} << (6 * i)) - 1;
    if ((first & ~low_mask) == (last & ~low_mask)) continue;
    if ((first & low_mask) != 0) {
      split_same_length(first, first | low_mask, out);
      split_same_length((first | low_mask) + 1, last, out);
      return;
    }
    if ((last & low_mask) != low_mask) {
      split_same_length(first, (last & ~low_mask) - 1, out);
      split_same_length(last & ~low_mask, last, out);
      return;
    }
  }
  const std::vector<uint8_t> a = encode(first), b = encode(last);
  Utf8Sequence sequence;
  for (size_t i = 0; i < a.size(); ++i) sequence.push_back({a[i], b[i]});
  out.push_back(std::move(sequence));
}

}  // namespace

std::vector<Utf8Sequence> utf8_sequences(uint32_t first, uint32_t last) {
  std::vector<Utf8Sequence> out;
  last = std::min(last, kMaxCodePoint);
  // Cut at the encoded-length boundaries and around the surrogates.
  constexpr uint32_t kCuts[][2] = {
      {0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xD7FF}, {0xE000, 0xFFFF}, {0x10000, kMaxCodePoint}};
  for (const auto& cut : kCuts) {
    const uint32_t lo = std::max(first, cut[0]), hi = std::min(last, cut[1]);
    if (lo <= hi) split_same_length(lo, hi, out);
  }
  return out;
}

CodePointRanges normalize_ranges(CodePointRanges ranges) {
  std::sort(ranges.begin(), ranges.end());
  CodePointRanges merged;
  for (const auto& [first, last] : ranges) {
    if (first > last) continue;
    if (!merged.empty() && first <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, last);
    else
      merged.push_back({first, last});
  }
  return merged;
}

CodePointRanges complement_ranges(const CodePointRanges& normalized) {
  CodePointRanges out;
  uint32_t next = 0;
  for (const auto& [first, last] : normalized) {
    if (first > next) out.push_back({next, first - 1});
    next = last + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

}  // namespace trellis
