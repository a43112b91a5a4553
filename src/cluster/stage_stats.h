// One pipeline stage's figures, and their form on the wire (each stage reports after a step).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "model/layer_range.h"

namespace trellis {

struct StageStats {
  int rank = 0;
  LayerRange layers;
  double busy_s = 0;        // time spent computing its layers
  uint64_t bytes_sent = 0;  // hidden rows (or logits, from the last stage) sent on
  uint64_t peak_rss = 0;    // the process's peak resident memory, in bytes
  int64_t n_steps = 0;
};

inline std::vector<uint8_t> encode_stage_stats(const StageStats& s) {
  const int64_t words[8] = {s.rank,
                            s.layers.begin,
                            s.layers.end,
                            static_cast<int64_t>(s.busy_s * 1e9),
                            static_cast<int64_t>(s.bytes_sent),
                            static_cast<int64_t>(s.peak_rss),
                            s.n_steps,
                            (s.layers.first ? 1 : 0) | (s.layers.last ? 2 : 0)};
  std::vector<uint8_t> bytes(sizeof words);
  std::memcpy(bytes.data(), words, sizeof words);
  return bytes;
}

// False when `bytes` is not a report.
inline bool decode_stage_stats(const std::vector<uint8_t>& bytes, StageStats& s) {
  int64_t words[8];
  if (bytes.size() != sizeof words) return false;
  std::memcpy(words, bytes.data(), sizeof words);
  s.rank = static_cast<int>(words[0]);
  s.layers = LayerRange{words[1], words[2], (words[7] & 1) != 0, (words[7] & 2) != 0};
  s.busy_s = static_cast<double>(words[3]) * 1e-9;
  s.bytes_sent = static_cast<uint64_t>(words[4]);
  s.peak_rss = static_cast<uint64_t>(words[5]);
  s.n_steps = words[6];
  return true;
}

}  // namespace trellis
