// Run-time detection of the CPU features the SIMD kernels need (computed once, cached).
#pragma once

namespace trellis {

struct CpuFeatures {
  bool avx2_fma_f16c = false;  // x86-64: AVX2, FMA and F16C, and the OS saves the ymm registers
  bool neon = false;           // AArch64: Advanced SIMD (always present there)
  bool neon_dotprod = false;   // AArch64: the SDOT/UDOT instructions (ARMv8.2 dotprod)
};

const CpuFeatures& cpu_features();

}  // namespace trellis
