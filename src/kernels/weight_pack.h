// Weights repacked at load time into a layout that one kernel variant reads faster than the GGUF
// rows. Packing changes only where the bytes are, never a result: the variant computes every
// output element of a packed matrix exactly as it would from the rows (batch invariance holds
// across layouts too). The layouts: q4_0_x16_layout.h (WeightLayout::Q4_0_X16, for AVX512) and
// float_x16_layout.h (WeightLayout::FLOAT_X16: F32, F16 and BF16, for AVX512).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "kernels/kernel_isa.h"
#include "kernels/float_x16_layout.h"
#include "kernels/matmul.h"
#include "kernels/q4_0_x16_layout.h"

namespace trellis {

// Packed matrices start on this boundary (the kernel's vector loads are then aligned).
inline constexpr size_t kPackedWeightAlignment = 64;

// Memory for packed matrices, aligned to kPackedWeightAlignment; null when there is none. Large
// buffers are aligned to, and asked to be backed by, huge pages: decode streams every weight once
// per token, and with 4 KiB pages that is a TLB miss every 4 KiB.
struct PackedBytesFree {
  void operator()(uint8_t* p) const { std::free(p); }
};
using PackedBytes = std::unique_ptr<uint8_t, PackedBytesFree>;
PackedBytes allocate_packed_bytes(size_t bytes);

// Whether `isa` has a packed layout for w (a GGUF-row view), i.e. whether pack_weight applies.
bool weight_packable(KernelIsa isa, const WeightView& w);
// Bytes of the packed copy of w (a multiple of kPackedWeightAlignment); precondition: packable.
size_t packed_weight_bytes(const WeightView& w);
// Writes the packed copy of w into dst (packed_weight_bytes(w) bytes, aligned to
// kPackedWeightAlignment) and returns the view of it. Precondition: weight_packable(isa, w).
WeightView pack_weight(KernelIsa isa, const WeightView& w, uint8_t* dst);

}  // namespace trellis
