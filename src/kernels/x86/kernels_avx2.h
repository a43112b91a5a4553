// The AVX2 row kernels (x86/*.cpp), gathered into avx2_kernels() by kernels_avx2.cpp.
#pragma once

#include <cstdint>

#include "kernels/matmul_internal.h"

namespace trellis::kernels_detail::avx2 {

void matmul_f32(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_f16(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_bf16(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_q4_0(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_q4_1(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_q5_0(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_q5_1(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_q8_0(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_q4_k(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_q5_k(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_q6_k(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void quantize_act_q8_0(const float* x, void* out, int64_t n_in);
void quantize_act_q8_k(const float* x, void* out, int64_t n_in);

}  // namespace trellis::kernels_detail::avx2
