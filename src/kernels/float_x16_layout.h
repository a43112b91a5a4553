// WeightLayout::FLOAT_X16: F32, F16 or BF16 weights packed for the AVX512 variant (made by
// pack_weight, kernels/weight_pack.h; read by x86/avx512/matmul_float_avx512.cpp). That variant
// holds sixteen output rows in the lanes of one vector and adds column i's products to them with
// one fused multiply-add per token (contract case 1b of matmul_internal.h). From GGUF rows it must
// transpose every 16 x 16 square of a tile first; packed, a column's sixteen values are one
// vector load. Rows are taken in groups of 16 (the last group repeats the last row, so that
// every lane computes a real row); group g holds its n_in columns in order, column i as the
// values of rows 16g .. 16g+15 in the type's own encoding (4 or 2 bytes each):
//   group g at g * n_in * 16 * element_bytes, column i of it at i * 16 * element_bytes.
#pragma once

#include <cstdint>

namespace trellis {

inline constexpr int64_t kFloatX16Rows = 16;

}  // namespace trellis
