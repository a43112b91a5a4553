// Run-time detection of the CPU features the SIMD kernels need (computed once, cached).
#pragma once

namespace trellis {

struct CpuFeatures {
  bool avx2_fma_f16c = false;  // x86-64: AVX2, FMA and F16C, and the OS saves the ymm registers
  // x86-64: AVX-512 F, BW, VL and VNNI, and the OS saves the opmask and zmm registers (on top of
  // avx2_fma_f16c).
  bool avx512_vnni = false;
  bool neon = false;          // AArch64: Advanced SIMD (always present there)
  bool neon_dotprod = false;  // AArch64: the SDOT/UDOT instructions (ARMv8.2 dotprod)
};

const CpuFeatures& cpu_features();

}  // namespace trellis
