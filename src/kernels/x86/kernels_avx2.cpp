// The AVX2 kernel table (every supported type has an AVX2 kernel, and so has attention).
#include "kernels/x86/kernels_avx2.h"

#include "kernels/x86/attention_avx2.h"

namespace trellis::kernels_detail {

const KernelTable& avx2_kernels() {
  static const KernelTable table = [] {
    KernelTable t;
    t.f32 = avx2::matmul_f32;
    t.f16 = avx2::matmul_f16;
    t.bf16 = avx2::matmul_bf16;
    t.q4_0 = avx2::matmul_q4_0;
    t.q4_1 = avx2::matmul_q4_1;
    t.q5_0 = avx2::matmul_q5_0;
    t.q5_1 = avx2::matmul_q5_1;
    t.q8_0 = avx2::matmul_q8_0;
    // q2_k, q3_k: no AVX2 kernel yet; the null entries take the scalar one.
    t.q4_k = avx2::matmul_q4_k;
    t.q5_k = avx2::matmul_q5_k;
    t.q6_k = avx2::matmul_q6_k;
    t.quantize_q8_0 = avx2::quantize_act_q8_0;
    t.quantize_q8_k = avx2::quantize_act_q8_k;
    t.attend_head = attend_head_avx2;
    t.attend_head_dim_multiple = 8;
    t.attend_max_head_dim = kAttendAvx2MaxHeadDim;
    return t;
  }();
  return table;
}

}  // namespace trellis::kernels_detail
