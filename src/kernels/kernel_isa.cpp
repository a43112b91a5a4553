// The dispatch point: which variants this CPU runs, and each variant's kernel table.
#include "kernels/kernel_isa.h"

#include "kernels/cpu_features.h"
#include "kernels/matmul_internal.h"

namespace trellis {

std::string_view kernel_isa_name(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::SCALAR:
      return "scalar";
    case KernelIsa::AVX2:
      return "avx2";
    case KernelIsa::AVX512:
      return "avx512";
    case KernelIsa::NEON:
      return "neon";
  }
  return "unknown";
}

bool kernel_isa_supported(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::SCALAR:
      return true;
    case KernelIsa::AVX2:
#if defined(__x86_64__)
      return cpu_features().avx2_fma_f16c;
#else
      return false;
#endif
    case KernelIsa::AVX512:
#if defined(__x86_64__)
      return cpu_features().avx512_vnni;
#else
      return false;
#endif
    case KernelIsa::NEON:
#if defined(__aarch64__)
      return cpu_features().neon;
#else
      return false;
#endif
  }
  return false;
}

KernelIsa best_kernel_isa() {
  static const KernelIsa best = [] {
    if (kernel_isa_supported(KernelIsa::AVX512)) return KernelIsa::AVX512;
    if (kernel_isa_supported(KernelIsa::AVX2)) return KernelIsa::AVX2;
    if (kernel_isa_supported(KernelIsa::NEON)) return KernelIsa::NEON;
    return KernelIsa::SCALAR;
  }();
  return best;
}

namespace kernels_detail {

const KernelTable& isa_table(KernelIsa isa) {
  switch (isa) {
#if defined(__x86_64__)
    case KernelIsa::AVX2:
      return avx2_kernels();
    case KernelIsa::AVX512:
      return avx512_kernels();
#endif
#if defined(__aarch64__)
    case KernelIsa::NEON:
      return neon_kernels();
#endif
    default:
      return scalar_kernels();
  }
}

}  // namespace kernels_detail
}  // namespace trellis
