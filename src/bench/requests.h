// The requests the benchmarks submit, and the one place that tells a failed output apart.
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "engine/engine.h"

namespace trellis::bench {

// A greedy request that generates exactly max_tokens tokens (see engine.h), so that every run of
// a benchmark does the same work.
using trellis::greedy_request;

// An error carrying the engine's message when the request failed; ok for any other end.
Status output_status(const RequestOutput& out);

}  // namespace trellis::bench
