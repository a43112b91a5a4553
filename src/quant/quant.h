// Dequantization and quantization of GGUF tensor types. These scalar routines are the reference
// that every SIMD kernel is tested against; they follow the formats' definitions bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"
#include "tensor/dtype.h"

namespace trellis {

// Each converts n_blocks whole blocks of its type (a block of the float types is one value).
using DequantizeBlocks = void (*)(const void* src, float* dst, int64_t n_blocks);
using QuantizeBlocks = void (*)(const float* src, void* dst, int64_t n_blocks);

// The row of the quant table (quant_table.cpp) for one type.
struct QuantTraits {
  DType type = DType::F32;
  size_t block_struct_bytes = 0;  // sizeof the block struct; equal to the dtype table's bytes
  DequantizeBlocks dequantize = nullptr;
  QuantizeBlocks quantize = nullptr;
  // The stated round-trip bound: for finite inputs (f16: of normal magnitude), every element x of
  // a block comes back from dequantize(quantize(x)) within round_trip_bound * max |x| over the
  // block. tests/unit/quant/quant_table_test.cpp holds every row to it.
  double round_trip_bound = 0.0;
};

// The row of `type`, or null for a type this module cannot convert.
const QuantTraits* quant_traits(DType type);

// True for the types that have a row, i.e. that dequantize_row and quantize_row support.
bool can_dequantize(DType type);
bool can_quantize(DType type);
// The names of those types, in the table's order, for messages: "f32, f16, ..., q6_K".
std::string quant_type_names();
// Ok for a type with a row; otherwise an error, prefixed with `who`, that names the type and
// the supported ones.
Status require_quant(DType type, std::string_view who);

// Converts `n_elems` values stored as `type` at `src` to f32. Preconditions: can_dequantize(type),
// n_elems is a multiple of the type's block size, src holds row_bytes(type, n_elems) bytes and is
// 2-byte aligned (true of any row in GGUF tensor data: tensors start 32-aligned and every block
// size is even). The layouts are described in quant/block_types.h.
void dequantize_row(DType type, const void* src, float* dst, int64_t n_elems);

// Converts `n_elems` f32 values to `type` at `dst` (row_bytes(type, n_elems) bytes, 2-byte
// aligned), with the rounding of the format's reference quantizer (see quantize.cpp), so the
// bytes match the reference's. Preconditions: can_quantize(type), n_elems is a multiple of the
// block size, the values are finite (f32/f16/bf16 also take inf and NaN).
void quantize_row(DType type, const float* src, void* dst, int64_t n_elems);

// quantize_row with each value's error weighted by `importance` (one value per element: an
// importance matrix's mean squared activation of the element's column), as llama.cpp's
// quantizers weigh it (quant/quantize_k.cpp): for q3_K, q4_K, q5_K, q6_K, q4_0, q4_1, q5_0 and
// q5_1; the other types (q8_0, the floats) ignore it, as llama.cpp's do. Null: quantize_row.
// `n_elems`: one row (the blocks of 32 take the row's mean square into the weights).
void quantize_row_weighted(DType type, const float* src, void* dst, int64_t n_elems,
                           const float* importance);

}  // namespace trellis
