// Instruction-set variants of the kernels and the one place that picks among them: matmul and
// attention both take their kernels from the table of the chosen variant (matmul_internal.h).
#pragma once

#include <string_view>

namespace trellis {

// SCALAR is the portable reference that the others are tested against. AVX512 (AVX-512 F, BW,
// VL and VNNI) takes the AVX2 kernels for the types it has no kernel of its own for.
enum class KernelIsa { SCALAR, AVX2, AVX512, NEON };
std::string_view kernel_isa_name(KernelIsa isa);
// The fastest variant this CPU supports (detected once at startup).
KernelIsa best_kernel_isa();
bool kernel_isa_supported(KernelIsa isa);

}  // namespace trellis
