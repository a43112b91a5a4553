// Summary statistics of benchmark measurements.
#pragma once

#include <vector>

namespace trellis::bench {

struct Stats {
  double mean = 0;    // 0 when empty
  double stddev = 0;  // sample standard deviation (n - 1 in the denominator); 0 for n < 2
};
Stats stats(const std::vector<double>& values);

// The value at fraction p in [0, 1] of the sorted values, nearest rank: the element at index
// round(p * (n - 1)) (halves round up). 0 when empty. `values` need not be sorted.
double percentile(std::vector<double> values, double p);

}  // namespace trellis::bench
