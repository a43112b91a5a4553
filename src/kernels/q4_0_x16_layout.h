// WeightLayout::Q4_0_X16: Q4_0 packed for the AVX512 variant (made by pack_weight,
// kernels/weight_pack.h; read by x86/avx512/matmul_q4_0_x16_avx512.cpp). Decode streams every
// weight once per token, so the AVX-512 kernel's cost per block is what bounds it: from GGUF rows a
// 16-row tile gathers 16 scales and transposes 16 rows of quants for every block. Packed, the
// tile's bytes lie in the order it consumes them. Rows are taken in groups of 16 (the last group
// repeats the last row to fill its lanes); group g holds n_in / 32 blocks of kQ4_0X16BlockBytes,
// one per 32 columns:
//   bytes   0 ..  31: the 16 rows' f16 scales d, row r at 2r
//   bytes  32 .. 287: four 64-byte vectors t[0..3]; dword r of t[k] is bytes 4k .. 4k+3 of row
//                     r's qs[16] (so its low nibbles are codes 4k .. 4k+3, its high nibbles
//                     codes 16+4k .. 16+4k+3)
// Groups follow each other; the whole matrix is packed_weight_bytes long.
#pragma once

#include <cstddef>
#include <cstdint>

namespace trellis {

inline constexpr int64_t kQ4_0X16Rows = 16;
inline constexpr size_t kQ4_0X16BlockBytes = 32 + 256;

}  // namespace trellis
