// Dequantization and quantization of GGUF tensor types. These scalar routines are the reference
// that every SIMD kernel is tested against; they follow the formats' definitions bit for bit.
#pragma once

#include <cstdint>
#include <span>

#include "base/result.h"
#include "tensor/dtype.h"

namespace trellis {

// True for the types dequantize_row supports.
bool can_dequantize(DType type);
// True for the types quantize_row supports.
bool can_quantize(DType type);

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

}  // namespace trellis
