// Finds stop strings in streamed text, holding back text that may still turn into one.
//
// Semantics (independent of how the text is cut into pushes): the stream stops at the first byte
// position where some stop string ends; if several end there, the one that starts earliest (the
// longest) is cut. Everything before the cut is released, the stop string and anything after it
// are dropped.
//
// Held-back text: after each push, the longest suffix of the unreleased text that is a proper
// prefix of some stop string is kept back; everything before it is released. When the input is
// valid UTF-8 and the stop strings too, released text always ends on a character boundary (a match
// or a held suffix starts where a stop string starts, i.e. at a lead byte).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trellis {

class StopStringMatcher {
 public:
  // Empty strings are ignored (StopCondition::validate() rejects them).
  explicit StopStringMatcher(std::vector<std::string> stop_strings);

  // Appends `text` and returns the text now known to be output. Once a stop string is found the
  // return value is the text before it, stopped() becomes true and later pushes return "".
  std::string push(std::string_view text);
  // The same, appending the released text to `out`. Allocates nothing when `out` has room and the
  // held-back buffer has held a push this long before (without stop strings it is never used).
  void push(std::string_view text, std::string& out);

  // End of the stream without a stop string: releases the held-back text (a partial match that
  // never completed is ordinary output).
  std::string flush();
  void flush(std::string& out);

  bool stopped() const { return matched_index_.has_value(); }
  // Index (into the constructor's list) of the stop string that was found, if any.
  std::optional<size_t> matched_index() const { return matched_index_; }
  // Bytes currently held back: always < the longest stop string.
  size_t held_bytes() const { return held_.size(); }

 private:
  size_t held_suffix_bytes() const;

  std::vector<std::string> stop_strings_;
  std::vector<size_t> original_index_;  // [stop_strings_.size()], for matched_index()
  size_t max_stop_bytes_ = 0;
  std::string held_;  // unreleased text; never contains a whole stop string
  std::optional<size_t> matched_index_;
};

}  // namespace trellis
