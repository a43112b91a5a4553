// `trellis model quantize`: a GGUF file with F32, F16 or BF16 weights rewritten as one of
// llama.cpp's file types (quant_mix.h chooses each matrix's type). Every quantized row goes
// through quantize_row_weighted: the formats' quantizers with llama.cpp's weighting of each
// value's error (by magnitude; by an importance matrix's column when one is given, see
// model/imatrix_file.h). Q8_0 and Q4_0 without an importance matrix give llama-quantize's bytes.
// Streaming: the output is written tensor by tensor in chunks of rows, and the input's pages are
// let go after each tensor, so the memory is about one tensor's.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/result.h"
#include "base/thread_pool.h"
#include "model/imatrix_file.h"
#include "model/quant_mix.h"
#include "tensor/dtype.h"

namespace trellis {

// One tensor as it was written: its name, the input's type and the output's, and sizes.
struct QuantizedTensor {
  const std::string& name;
  DType from;
  DType to;
  uint64_t bytes_in;
  uint64_t bytes_out;
  bool weighted;  // an importance matrix weighed its rows
};

struct QuantizeTotals {
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  int64_t n_quantized = 0;  // tensors whose type changed
  int64_t n_tensors = 0;
};

// Writes `output` from `input` as file type `mix` (not MXFP4_MOE: the input has no experts'
// MXFP4 source). Calls on_tensor after each tensor is written. Errors name the file and, where one
// is at fault, the tensor: an input tensor to quantize that is already quantized, an output that
// is the input, a write that fails (the partial output is removed).
//
// `imatrix` (may be null), read from `imatrix_file`: its matrices weigh the rows of the tensors
// of the same names (an entry whose width is not the tensor's is an error naming both); the
// others quantize as without it. As in llama-quantize, q4_0's first eighth of ffn_down layers
// become q4_1 with one, and the file records it under quantize.imatrix.*.
Result<QuantizeTotals> quantize_model(const std::string& input, const std::string& output,
                                      QuantMix mix, ThreadPool& pool,
                                      const std::function<void(const QuantizedTensor&)>& on_tensor,
                                      const Imatrix* imatrix = nullptr,
                                      const std::string& imatrix_file = "");

}  // namespace trellis
