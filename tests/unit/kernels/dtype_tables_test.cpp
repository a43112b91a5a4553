// The per-type tables agree across modules: every type the quant table converts has a matmul
// (a reference row whose activations fit its blocks) and a kernel in every ISA variant's table,
// own or the scalar fallback, and every type with a kernel can be converted. A type without rows
// has neither.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"
#include "quant/quant.h"
#include "tensor/dtype.h"

namespace trellis {
namespace {

namespace kd = kernels_detail;

std::vector<DType> known_types() {
  std::vector<DType> types;
  for (const DTypeInfo& info : kDTypeTable) {
    if (info.block_elems != 0) types.push_back(info.type);
  }
  return types;
}

constexpr KernelIsa kAllIsas[] = {KernelIsa::SCALAR, KernelIsa::AVX2, KernelIsa::AVX512,
                                  KernelIsa::NEON};

TEST(DTypeTables, QuantAndMatmulCoverTheSameTypes) {
  int n_supported = 0;
  for (DType type : known_types()) {
    const std::string name(dtype_name(type));
    EXPECT_EQ(can_quantize(type), matmul_supports(type)) << name;
    if (!matmul_supports(type)) continue;
    ++n_supported;
    EXPECT_NE(kd::table_kernel(kd::scalar_kernels(), type), nullptr) << name;
    // The activations come in blocks of the weight block's size.
    EXPECT_EQ(kd::act_format_info(kd::act_format(type)).block_elems, dtype_info(type).block_elems)
        << name;
  }
  EXPECT_EQ(n_supported, 14);
}

// Each variant this build has (whether or not this CPU runs it) resolves every supported type to
// a kernel: its own, or the scalar one in its slot's place. A variant's table never names a type
// without a reference row (its kernel could not be checked against anything).
TEST(DTypeTables, EveryIsaTableHasAKernelForEverySupportedType) {
  for (KernelIsa isa : kAllIsas) {
    const kd::KernelTable& table = kd::isa_table(isa);
    for (DType type : known_types()) {
      const std::string where =
          std::string(kernel_isa_name(isa)) + " " + std::string(dtype_name(type));
      const kd::RowKernel own = kd::table_kernel(table, type);
      const kd::RowKernel scalar = kd::table_kernel(kd::scalar_kernels(), type);
      if (matmul_supports(type)) {
        EXPECT_TRUE(own != nullptr || scalar != nullptr) << where;
      } else {
        EXPECT_EQ(own, nullptr) << where;
        EXPECT_EQ(kd::table_kernel(kd::reference_kernels(isa), type), nullptr) << where;
      }
    }
    // Every activation format a supported type reads has a quantizer (own or scalar).
    for (DType type : known_types()) {
      if (!matmul_supports(type)) continue;
      const kd::ActFormat format = kd::act_format(type);
      if (format == kd::ActFormat::F32) continue;
      EXPECT_TRUE(kd::table_quantizer(table, format) != nullptr ||
                  kd::table_quantizer(kd::scalar_kernels(), format) != nullptr)
          << kernel_isa_name(isa) << " " << dtype_name(type);
    }
  }
}

// The variants' own kernels, as the tables list them, so that a row dropped from a variant's
// table (the type would silently run the scalar kernel, and still pass the bit-exactness tests)
// fails here.
TEST(DTypeTables, VariantsKeepTheirOwnKernels) {
  auto own_types = [](KernelIsa isa) {
    std::string names;
    for (DType type : known_types()) {
      if (kd::table_kernel(kd::isa_table(isa), type) == nullptr) continue;
      if (!names.empty()) names += " ";
      names += dtype_name(type);
    }
    return names;
  };
  EXPECT_EQ(own_types(KernelIsa::SCALAR),
            "f32 f16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K bf16 mxfp4");
#if defined(__x86_64__)
  EXPECT_EQ(own_types(KernelIsa::AVX2),
            "f32 f16 q4_0 q4_1 q5_0 q5_1 q8_0 q4_K q5_K q6_K bf16 mxfp4");
  EXPECT_EQ(own_types(KernelIsa::AVX512),
            "f32 f16 q4_0 q4_1 q5_0 q5_1 q8_0 q4_K q5_K q6_K bf16 mxfp4");
  EXPECT_NE(kd::table_kernel(kd::avx512_kernels(), DType::Q4_0),
            kd::table_kernel(kd::avx2_kernels(), DType::Q4_0))
      << "AVX512 runs its own Q4_0 kernel";
#endif
#if defined(__aarch64__)
  EXPECT_EQ(own_types(KernelIsa::NEON), "f16 q4_0 q8_0 q2_K q3_K q4_K q5_K q6_K");
#endif
}

TEST(DTypeTables, TypesWithoutRowsHaveNoMatmul) {
  for (DType type : {DType::Q8_1, DType::Q8_K, DType::I8, DType::I16, DType::F64}) {
    EXPECT_FALSE(matmul_supports(type)) << dtype_name(type);
    EXPECT_EQ(kd::act_format(type), kd::ActFormat::F32) << dtype_name(type);
  }
}

}  // namespace
}  // namespace trellis
