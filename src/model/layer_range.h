// The part of a model one process holds when the layers are split over several (a pipeline): a
// contiguous range of transformer blocks, plus the token embeddings on the first stage and the
// final norm and output head on the last. A single process holds everything.
#pragma once

#include <cstdint>

namespace trellis {

struct LayerRange {
  int64_t begin = 0;  // first block held
  int64_t end = 0;    // one past the last block held
  bool first = true;  // holds the token embeddings: the stage that turns tokens into hidden rows
  bool last = true;   // holds the output norm and head: the stage that turns rows into logits

  static LayerRange all(int64_t n_layer) { return LayerRange{0, n_layer, true, true}; }
  int64_t size() const { return end - begin; }
  bool contains(int64_t il) const { return il >= begin && il < end; }
};

}  // namespace trellis
