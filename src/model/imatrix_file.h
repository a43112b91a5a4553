// Importance matrices in llama.cpp's GGUF form, so that a file from either tool works in the
// other: general.type = "imatrix"; imatrix.datasets (the texts, array of strings),
// imatrix.chunk_count and imatrix.chunk_size (u32); and for each weight matrix NAME two F32
// tensors, NAME.in_sum2 ([n_cols, n_mat]: the sums of the squared activations that met each
// column, one row per expert) and NAME.counts ([1, n_mat]: how many activations were summed).
// A quantizer weighs each column by its mean, in_sum2 / counts (model/quantize_model.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace trellis {

struct ImatrixEntry {
  int64_t n_cols = 0;
  std::vector<double> sums;     // [n_mat][n_cols]
  std::vector<double> counts;   // [n_mat]
};

struct Imatrix {
  std::map<std::string, ImatrixEntry> entries;  // by weight matrix name ("blk.0.attn_q.weight")
  std::vector<std::string> datasets;
  uint32_t chunk_count = 0;
  uint32_t chunk_size = 0;

  // The mean squared activation of each column of `name` ([n_mat][n_cols]; 1 where nothing was
  // counted, as llama.cpp reads it), or nullopt when the matrix has no entry.
  std::optional<std::vector<float>> importance(const std::string& name) const;
};

// Errors name the file: not a GGUF imatrix (llama.cpp's legacy .dat form included: convert it
// with its tool's --output-format gguf), a tensor that is not F32, sums without counts, a size
// that does not divide, a non-finite or negative value.
Result<Imatrix> read_imatrix(const std::string& path);
Status write_imatrix(const Imatrix& imatrix, const std::string& path);

}  // namespace trellis
