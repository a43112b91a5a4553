// The process's memory figures, for reports (benchmarks, pipeline stages).
#pragma once

#include <cstdint>

namespace trellis {

// The largest resident set the process has had so far, in bytes.
uint64_t peak_rss_bytes();

}  // namespace trellis
