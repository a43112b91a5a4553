// The AVX2 row kernels (x86/*.cpp) and their table, avx2_kernels() (kernels_avx2.cpp).
#pragma once

#include <cstdint>

#include "kernels/matmul_internal.h"
#include "kernels/x86/attention_avx2.h"

namespace trellis::kernels_detail::avx2 {

void matmul_f32(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_f16(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_bf16(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_q4_0(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_q4_1(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_q5_0(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_q5_1(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_q8_0(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_mxfp4(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_q4_k(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_q5_k(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_q6_k(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void quantize_act_q8_0(const float* x, void* out, int64_t n_in);
void quantize_act_q8_k(const float* x, void* out, int64_t n_in);

}  // namespace trellis::kernels_detail::avx2

namespace trellis::kernels_detail {

// The AVX2 table, built at compile time (the AVX512 table starts from it). Q2_K and Q3_K have no
// AVX2 kernel yet: they take the scalar one.
constexpr KernelTable make_avx2_table() {
  KernelTable t;
  t.matmul = row_kernels({
      {DType::F32, avx2::matmul_f32},
      {DType::F16, avx2::matmul_f16},
      {DType::BF16, avx2::matmul_bf16},
      {DType::Q4_0, avx2::matmul_q4_0},
      {DType::Q4_1, avx2::matmul_q4_1},
      {DType::Q5_0, avx2::matmul_q5_0},
      {DType::Q5_1, avx2::matmul_q5_1},
      {DType::Q8_0, avx2::matmul_q8_0},
      {DType::MXFP4, avx2::matmul_mxfp4},
      {DType::Q4_K, avx2::matmul_q4_k},
      {DType::Q5_K, avx2::matmul_q5_k},
      {DType::Q6_K, avx2::matmul_q6_k},
  });
  t.quantize_act[static_cast<size_t>(ActFormat::Q8_0)] = avx2::quantize_act_q8_0;
  t.quantize_act[static_cast<size_t>(ActFormat::Q8_K)] = avx2::quantize_act_q8_k;
  t.attend_head = attend_head_avx2;
  t.attend_head_dim_multiple = 8;
  t.attend_max_head_dim = kAttendAvx2MaxHeadDim;
  return t;
}

}  // namespace trellis::kernels_detail
