// A token's index in a model's vocabulary. The bookkeeping modules (batch, prefix, sched, sample)
// speak of tokens only through this type, so they do not depend on the tokenizer.
#pragma once

#include <cstdint>

namespace trellis {

using TokenId = int32_t;
inline constexpr TokenId kNoToken = -1;  // "no such token" (e.g. a vocab without BOS)

}  // namespace trellis
