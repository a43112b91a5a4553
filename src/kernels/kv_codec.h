// Rows of the KV cache in its element types (kv/kv_storage.h): what attention writes and reads.
#pragma once

#include <cstdint>

#include "kv/kv_storage.h"

namespace trellis {

// Stores n f32 values as one row of `type` (n a multiple of kv_type_block_elements(type)):
// f16 rounds to nearest, q8_0 and q4_0 quantize block by block as GGUF's reference quantizers do.
void kv_encode_row(KvType type, const float* x, uint8_t* row, int64_t n);

// The n values of a row as f32: exactly the values every attention kernel computes with (a code
// times its block's scale is one f32 product, which the SIMD kernels form the same way).
void kv_decode_row(KvType type, const uint8_t* row, float* out, int64_t n);

}  // namespace trellis
