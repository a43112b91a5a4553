// The AVX512 kernel table: the AVX2 table with the AVX-512 kernels in place.
#include "kernels/x86/avx512/kernels_avx512.h"

namespace trellis::kernels_detail {

const KernelTable& avx512_kernels() {
  static const KernelTable table = [] {
    KernelTable t = avx2_kernels();
    t.q4_0 = avx512::matmul_q4_0;
    t.q5_0 = avx512::matmul_q5_0;
    t.q8_0 = avx512::matmul_q8_0;
    t.q4_k = avx512::matmul_q4_k;
    t.q6_k = avx512::matmul_q6_k;
    return t;
  }();
  return table;
}

}  // namespace trellis::kernels_detail
