#include "kernels/cpu_features.h"

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

namespace trellis {
namespace {

CpuFeatures detect() {
  CpuFeatures features;
#if defined(__x86_64__)
  // __builtin_cpu_supports also checks (via XGETBV) that the OS enables the AVX state.
  __builtin_cpu_init();
  features.avx2_fma_f16c = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                           __builtin_cpu_supports("f16c");
#endif
#if defined(__aarch64__)
  features.neon = true;
#if defined(__linux__)
  constexpr unsigned long kHwcapAsimdDp = 1ul << 20;  // HWCAP_ASIMDDP
  features.neon_dotprod = (getauxval(AT_HWCAP) & kHwcapAsimdDp) != 0;
#endif
#endif
  return features;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

}  // namespace trellis
