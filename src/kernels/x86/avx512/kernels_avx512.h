// The AVX-512 row kernels (x86/avx512/*.cpp), gathered into avx512_kernels() by
// kernels_avx512.cpp.
#pragma once

#include <cstdint>

#include "kernels/matmul_internal.h"

namespace trellis::kernels_detail::avx512 {

// Float weights (contract case 1b), as GGUF rows and packed as WeightLayout::FLOAT_X16
// (row_begin a multiple of 16); either layout gives the same bits.
void matmul_f32(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_f16(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_bf16(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_f32_x16(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_f16_x16(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_bf16_x16(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_q4_0(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
// Q4_0 packed as WeightLayout::Q4_0_X16; row_begin is a multiple of 16.
void matmul_q4_0_x16(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_q5_0(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_q8_0(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_q4_k(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_q6_k(const MatmulArgs& a, int64_t row_begin, int64_t row_end);

}  // namespace trellis::kernels_detail::avx512
