#include "grammar/code_point_set.h"

#include <algorithm>
#include <cassert>

namespace trellis {

CodePointSet CodePointSet::range(char32_t first, char32_t last) {
  CodePointSet set;
  set.add_range(first, last);
  return set;
}

CodePointSet CodePointSet::all() {
  CodePointSet set;
  set.add_range(0, 0xD7FF);
  set.add_range(0xE000, kMax);
  return set;
}

void CodePointSet::add_range(char32_t first, char32_t last) {
  assert(first <= last && last <= kMax);
  // Merge every range that overlaps or touches [first, last] into it.
  std::vector<CodePointRange> merged;
  merged.reserve(ranges_.size() + 1);
  bool placed = false;
  for (const CodePointRange& r : ranges_) {
    if (r.last + 1 < first) {
      merged.push_back(r);
    } else if (last + 1 < r.first) {
      if (!placed) merged.push_back({first, last});
      placed = true;
      merged.push_back(r);
    } else {
      first = std::min(first, r.first);
      last = std::max(last, r.last);
    }
  }
  if (!placed) merged.push_back({first, last});
  ranges_ = std::move(merged);
}

void CodePointSet::add(const CodePointSet& other) {
  for (const CodePointRange& r : other.ranges_) add_range(r.first, r.last);
}

void CodePointSet::remove_range(char32_t first, char32_t last) {
  std::vector<CodePointRange> kept;
  kept.reserve(ranges_.size() + 1);
  for (const CodePointRange& r : ranges_) {
    if (r.last < first || r.first > last) {
      kept.push_back(r);
      continue;
    }
    if (r.first < first) kept.push_back({r.first, first - 1});
    if (r.last > last) kept.push_back({last + 1, r.last});
  }
  ranges_ = std::move(kept);
}

void CodePointSet::remove(const CodePointSet& other) {
  for (const CodePointRange& r : other.ranges_) remove_range(r.first, r.last);
}

CodePointSet CodePointSet::complement() const {
  CodePointSet result = all();
  result.remove(*this);
  return result;
}

bool CodePointSet::contains(char32_t cp) const {
  auto it =
      std::upper_bound(ranges_.begin(), ranges_.end(), cp,
                       [](char32_t value, const CodePointRange& r) { return value < r.first; });
  return it != ranges_.begin() && std::prev(it)->last >= cp;
}

long CodePointSet::single() const {
  if (ranges_.size() != 1 || ranges_[0].first != ranges_[0].last) return -1;
  return static_cast<long>(ranges_[0].first);
}

}  // namespace trellis
