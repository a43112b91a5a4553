// The requests the benchmarks submit, and the one place that tells a failed output apart.
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "engine/engine.h"

namespace trellis::bench {

// A greedy request that generates exactly max_tokens tokens (end of sequence ignored), so that
// every run of a benchmark does the same work.
EngineRequest greedy_request(std::vector<TokenId> prompt, int32_t max_tokens);

// An error carrying the engine's message when the request failed; ok for any other end.
Status output_status(const RequestOutput& out);

}  // namespace trellis::bench
