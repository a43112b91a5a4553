#include "kernels/cpu_features.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

namespace trellis {
namespace {

#if defined(__x86_64__)
// CPUID (leaf 1: FMA = ecx bit 12, OSXSAVE = bit 27, AVX = bit 28, F16C = bit 29; leaf 7: AVX2 =
// ebx bit 5) and XGETBV (the OS saves the xmm and ymm state: XCR0 bits 1 and 2). Written out
// because clang's __builtin_cpu_supports does not know "f16c".
bool detect_avx2_fma_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const bool fma = (ecx >> 12) & 1, osxsave = (ecx >> 27) & 1, avx = (ecx >> 28) & 1,
             f16c = (ecx >> 29) & 1;
  if (!(fma && osxsave && avx && f16c)) return false;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 6u) != 6u) return false;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  return (ebx >> 5) & 1;
}

// CPUID leaf 7: AVX512F = ebx bit 16, AVX512BW = bit 30, AVX512VL = bit 31, AVX512_VNNI = ecx
// bit 11; XGETBV: the OS saves the opmask and both halves of the zmm state (XCR0 bits 5, 6, 7).
bool detect_avx512_vnni() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const bool f = (ebx >> 16) & 1, bw = (ebx >> 30) & 1, vl = (ebx >> 31) & 1,
             vnni = (ecx >> 11) & 1;
  if (!(f && bw && vl && vnni)) return false;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  return (xcr0_lo & 0xe6u) == 0xe6u;
}
#endif

CpuFeatures detect() {
  CpuFeatures features;
#if defined(__x86_64__)
  features.avx2_fma_f16c = detect_avx2_fma_f16c();
  features.avx512_vnni = features.avx2_fma_f16c && detect_avx512_vnni();
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
