#include "bench_support.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>

namespace trellis::cli {

Stats stats(const std::vector<double>& values) {
  Stats s;
  if (values.empty()) return s;
  for (double v : values) s.mean += v;
  s.mean /= static_cast<double>(values.size());
  if (values.size() > 1) {
    double sq = 0;
    for (double v : values) sq += (v - s.mean) * (v - s.mean);
    s.stddev = std::sqrt(sq / static_cast<double>(values.size() - 1));
  }
  return s;
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto k = static_cast<size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(k, values.size() - 1)];
}

uint64_t peak_rss_bytes() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

std::vector<TokenId> bench_tokens(int32_t n, int64_t n_vocab, uint32_t seed) {
  std::vector<TokenId> ids;
  uint32_t state = seed;
  for (int32_t i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    ids.push_back(static_cast<TokenId>(3 + (state >> 8) % static_cast<uint32_t>(n_vocab - 3)));
  }
  return ids;
}

}  // namespace trellis::cli
