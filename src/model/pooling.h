// How an embedding model turns the hidden rows of one input into its output: llama.cpp's
// `ARCH.pooling_type` key (the numbers are its values).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace trellis {

enum class Pooling : uint32_t {
  NONE = 0,  // one vector per token (not served: every endpoint wants one vector per input)
  MEAN = 1,  // the average of the rows
  CLS = 2,   // the first row ([CLS])
  LAST = 3,  // the last row (decoder embedders)
  RANK = 4,  // a reranker: the classification head over the first row gives the scores
};

// "none", "mean", "cls", "last", "rank".
std::string_view pooling_name(Pooling pooling);
// The pooling named `name` (as pooling_name writes it), if any.
std::optional<Pooling> pooling_from_name(std::string_view name);
// The pooling of the key's value, if it is one.
std::optional<Pooling> pooling_from_code(int64_t code);

}  // namespace trellis
