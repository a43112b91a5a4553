#include "bench/stats.h"

#include <algorithm>
#include <cmath>

namespace trellis::bench {

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

}  // namespace trellis::bench
