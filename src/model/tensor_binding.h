// Binding a GGUF file's tensors to what the forward passes read: matrices stay in the file's
// mapping (WeightView), vectors (norms, biases) are dequantized to f32. Errors name the file, the
// tensor and what is wrong with it (missing, shape, type).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "gguf/gguf_file.h"
#include "kernels/matmul.h"
#include "kernels/weight_pack.h"

namespace trellis {

// The tensor `name` of exactly `shape` (trailing dimensions of 1 aside).
Result<const GgufTensor*> find_tensor(const GgufFile& file, const std::string& name,
                                      std::vector<int64_t> shape);
// An [n_in] x n_out matrix of a type matmul reads.
Result<WeightView> bind_matrix(const GgufFile& file, const std::string& name, int64_t n_in,
                               int64_t n_out);
// A tensor of `shape` read as f32 values, its rows one after the other.
Result<std::vector<float>> bind_values(const GgufFile& file, const std::string& name,
                                       const std::vector<int64_t>& shape);
Result<std::vector<float>> bind_vector(const GgufFile& file, const std::string& name, int64_t n);

// Repacks the matrices that best_kernel_isa() has a packed layout for (kernels/weight_pack.h)
// into the returned memory, pointing their views at it, and drops the file's copies from resident
// memory, so that the model does not hold both. Null when none is packable (or no memory).
PackedBytes pack_matmul_weights(const GgufFile& file, const std::vector<WeightView*>& weights);

}  // namespace trellis
