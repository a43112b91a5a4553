// The process's memory figures, for the benchmarks' reports.
#pragma once

#include <cstdint>

namespace trellis::bench {

// The largest resident set the process has had so far, in bytes.
uint64_t peak_rss_bytes();

}  // namespace trellis::bench
