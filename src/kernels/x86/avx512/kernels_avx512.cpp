// The AVX512 kernel table: the AVX2 table with the AVX-512 kernels in place (the 32-element
// signed block types, Q4_K, Q6_K and attention), and the kernel of its packed Q4_0 layout.
#include "kernels/x86/avx512/kernels_avx512.h"

#include "kernels/x86/avx512/attention_avx512.h"

namespace trellis::kernels_detail {

const KernelTable& avx512_kernels() {
  static const KernelTable table = [] {
    KernelTable t = avx2_kernels();
    t.q4_0 = avx512::matmul_q4_0;
    t.q4_0_x16 = avx512::matmul_q4_0_x16;
    t.q5_0 = avx512::matmul_q5_0;
    t.q8_0 = avx512::matmul_q8_0;
    t.q4_k = avx512::matmul_q4_k;
    t.q6_k = avx512::matmul_q6_k;
    t.attend_head = attend_head_avx512;
    t.attend_group = attend_group_avx512;
    t.attend_head_dim_multiple = 8;
    t.attend_max_head_dim = kAttendAvx512MaxHeadDim;
    return t;
  }();
  return table;
}

}  // namespace trellis::kernels_detail
