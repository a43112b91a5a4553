// Collects an importance matrix (model/imatrix_file.h) from a model's forward passes: for every
// weight matrix of the file, the sum over the rows that met it of each column's squared input, and
// how many rows that was. Matrices that read one input (attn_q, attn_k and attn_v; ffn_gate and
// ffn_up) get the same sums, as in llama.cpp's files. Hand it to the engine as its
// EngineConfig::activation_observer, run text through, then take() the matrix.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/activation_observer.h"
#include "model/imatrix_file.h"

namespace trellis {

class ImatrixCollector : public ActivationObserver {
 public:
  // `file`: the model's GGUF, whose tensor names the entries take.
  explicit ImatrixCollector(const GgufFile& file);

  void observe(int64_t layer, MatmulInput input, const float* rows, int32_t n_rows,
               int64_t n_cols) override;

  // Rows observed so far (of the first layer's attention input: the tokens run).
  int64_t n_rows() const { return n_rows_; }
  // The matrix of what was observed; `datasets`, `chunk_count` and `chunk_size` describe it.
  Imatrix take(std::vector<std::string> datasets, uint32_t chunk_count, uint32_t chunk_size) const;

 private:
  struct Sums {
    std::vector<double> sums;
    double count = 0;
  };
  using Key = std::pair<int64_t, MatmulInput>;

  std::map<Key, std::vector<std::string>> names_;  // the file's matrices of each input
  std::map<Key, Sums> sums_;
  int64_t n_rows_ = 0;
};

}  // namespace trellis
