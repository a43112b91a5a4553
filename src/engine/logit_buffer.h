// The rows of logits a step returns, [row][n_vocab]. The memory is taken uninitialized, so rows
// reserved for the largest step (every decoding sequence verifying a whole draft) cost address
// space, not resident pages, until a step writes them.
#pragma once

#include <cstddef>
#include <memory>

namespace trellis {

class LogitBuffer {
 public:
  // Room for n_rows rows of n_vocab; grows (dropping the contents) when it has less.
  void reserve(size_t n_rows, size_t n_vocab) {
    const size_t size = n_rows * n_vocab;
    if (size <= size_) return;
    data_ = std::make_unique_for_overwrite<float[]>(size);
    size_ = size;
  }
  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }

 private:
  std::unique_ptr<float[]> data_;
  size_t size_ = 0;
};

}  // namespace trellis
