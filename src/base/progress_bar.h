// A one-line progress bar on stderr, drawn only when stderr is a terminal.
#pragma once

#include <cstdint>
#include <string>

namespace trellis {

class ProgressBar {
 public:
  // `total` is the amount of work in any unit (bytes, items); `label` prefixes the bar.
  ProgressBar(std::string label, uint64_t total);
  ~ProgressBar();  // finishes the line if one was drawn

  // Sets the amount done so far; redraws at most once per whole percent.
  void update(uint64_t done);

 private:
  std::string label_;
  uint64_t total_;
  int last_percent_ = -1;
  bool enabled_;
};

}  // namespace trellis
