// The AVX512 kernel table: the AVX2 table with the AVX-512 kernels in place (the float types, the
// 32-element signed block types, Q4_K, Q6_K and attention), and the kernels of its packed
// layouts (float weights, Q4_0).
#include "kernels/x86/avx512/kernels_avx512.h"

#include "kernels/x86/avx512/attention_avx512.h"
#include "kernels/x86/kernels_avx2.h"

namespace trellis::kernels_detail {
namespace {

// Evaluated at compile time: this file is compiled for AVX-512, and a table built at run time
// here would instantiate the table templates with AVX-512 code that the linker may then hand to
// callers on other CPUs (see avx512_util.h).
// The matmul kernels of its own; the other types keep the AVX2 ones.
constexpr TypeKernel kOwnKernels[] = {
    {DType::F32, avx512::matmul_f32},   {DType::F16, avx512::matmul_f16},
    {DType::BF16, avx512::matmul_bf16}, {DType::Q4_0, avx512::matmul_q4_0},
    {DType::Q5_0, avx512::matmul_q5_0}, {DType::Q8_0, avx512::matmul_q8_0},
    {DType::Q4_K, avx512::matmul_q4_k}, {DType::Q6_K, avx512::matmul_q6_k},
};

// The kernels of its packed layouts (kernels/weight_pack.h), by weight type.
constexpr TypeKernel kPackedKernels[] = {
    {DType::F32, avx512::matmul_f32_x16},
    {DType::F16, avx512::matmul_f16_x16},
    {DType::BF16, avx512::matmul_bf16_x16},
    {DType::Q4_0, avx512::matmul_q4_0_x16},
};

constexpr KernelTable make_table() {
  KernelTable t = make_avx2_table();
  t.matmul = with_kernels(t.matmul, kOwnKernels);
  t.packed = row_kernels(kPackedKernels);
  t.attend_head = attend_head_avx512;
  t.attend_group = attend_group_avx512;
  t.attend_tile = attend_tile_avx512;
  t.attend_tile_dim_multiple = 64;
  t.attend_head_dim_multiple = 8;
  t.attend_max_head_dim = kAttendAvx512MaxHeadDim;
  return t;
}

}  // namespace

const KernelTable& avx512_kernels() {
  static constexpr KernelTable kTable = make_table();
  return kTable;
}

}  // namespace trellis::kernels_detail
