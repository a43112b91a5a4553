#include "sample/stop_string_matcher.h"

#include <algorithm>
#include <utility>

namespace trellis {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings) {
  for (size_t i = 0; i < stop_strings.size(); ++i) {
    if (stop_strings[i].empty()) continue;
    max_stop_bytes_ = std::max(max_stop_bytes_, stop_strings[i].size());
    stop_strings_.push_back(std::move(stop_strings[i]));
    original_index_.push_back(i);
  }
}

std::string StopStringMatcher::push(std::string_view text) {
  std::string out;
  push(text, out);
  return out;
}

void StopStringMatcher::push(std::string_view text, std::string& out) {
  if (stopped()) return;
  if (max_stop_bytes_ == 0) {  // nothing to look for: everything is output at once
    out.append(text);
    return;
  }
  held_.append(text);

  // held_ had no whole stop string before this push, so any match involves the new text; the
  // first occurrence of each string is the one that ends first.
  size_t best_start = std::string::npos;
  size_t best_end = std::string::npos;
  size_t best_index = 0;
  for (size_t i = 0; i < stop_strings_.size(); ++i) {
    const size_t start = held_.find(stop_strings_[i]);
    if (start == std::string::npos) continue;
    const size_t end = start + stop_strings_[i].size();
    if (end < best_end || (end == best_end && start < best_start)) {
      best_start = start;
      best_end = end;
      best_index = i;
    }
  }
  if (best_start != std::string::npos) {
    matched_index_ = original_index_[best_index];
    out.append(held_, 0, best_start);
    held_.clear();
    return;
  }

  //   [0 ........ release) [release ........ size)
  //    output now           may start a stop string
  const size_t release = held_.size() - held_suffix_bytes();
  out.append(held_, 0, release);
  held_.erase(0, release);
}

std::string StopStringMatcher::flush() {
  std::string out;
  out.swap(held_);
  return out;
}

void StopStringMatcher::flush(std::string& out) {
  out.append(held_);
  held_.clear();
}

// Length of the longest suffix of held_ that is a proper prefix of a stop string (0 if none).
// O(max_stop_bytes^2 * n_stop_strings) per call, which is small for realistic stop strings.
size_t StopStringMatcher::held_suffix_bytes() const {
  if (max_stop_bytes_ == 0) return 0;
  const std::string_view held(held_);
  for (size_t length = std::min(held.size(), max_stop_bytes_ - 1); length > 0; --length) {
    const std::string_view suffix = held.substr(held.size() - length);
    for (const std::string& stop : stop_strings_) {
      if (stop.size() > length && stop.compare(0, length, suffix) == 0) return length;
    }
  }
  return 0;
}

}  // namespace trellis
