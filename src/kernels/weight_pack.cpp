// The packed weight layouts (see weight_pack.h). Plain byte copies: packing runs once per matrix
// at load time, at memory speed, and its output is the same on every CPU.
#include "kernels/weight_pack.h"

#include <sys/mman.h>

#include <algorithm>
#include <cassert>
#include <cstring>

#include "quant/block_types.h"

namespace trellis {
namespace {

constexpr size_t kQ4_0Bytes = sizeof(block_q4_0);  // f16 d, then qs[16]

int64_t q4_0_x16_groups(const WeightView& w) {
  return (w.n_out + kQ4_0X16Rows - 1) / kQ4_0X16Rows;
}

void pack_q4_0_x16(const WeightView& w, uint8_t* dst) {
  const auto* src = static_cast<const uint8_t*>(w.data);
  const int64_t n_blocks = w.n_in / 32;
  const size_t row_bytes = static_cast<size_t>(n_blocks) * kQ4_0Bytes;
  for (int64_t g = 0; g < q4_0_x16_groups(w); ++g) {
    for (int64_t b = 0; b < n_blocks; ++b) {
      uint8_t* out = dst + static_cast<size_t>(g * n_blocks + b) * kQ4_0X16BlockBytes;
      for (int64_t r = 0; r < kQ4_0X16Rows; ++r) {
        // Lanes past the last row repeat it, so that every lane computes a real row.
        const int64_t row = std::min(g * kQ4_0X16Rows + r, w.n_out - 1);
        const uint8_t* block =
            src + static_cast<size_t>(row) * row_bytes + static_cast<size_t>(b) * kQ4_0Bytes;
        std::memcpy(out + 2 * r, block, 2);
        for (int k = 0; k < 4; ++k) std::memcpy(out + 32 + 64 * k + 4 * r, block + 2 + 4 * k, 4);
      }
    }
  }
}

size_t float_element_bytes(DType type) {
  return type == DType::F32 ? 4 : 2;
}

int64_t float_x16_groups(const WeightView& w) {
  return (w.n_out + kFloatX16Rows - 1) / kFloatX16Rows;
}

void pack_float_x16(const WeightView& w, uint8_t* dst) {
  const auto* src = static_cast<const uint8_t*>(w.data);
  const size_t element = float_element_bytes(w.type);
  const size_t row_bytes = static_cast<size_t>(w.n_in) * element;
  for (int64_t g = 0; g < float_x16_groups(w); ++g) {
    uint8_t* group = dst + static_cast<size_t>(g * w.n_in * kFloatX16Rows) * element;
    for (int64_t r = 0; r < kFloatX16Rows; ++r) {
      // Lanes past the last row repeat it, so that every lane computes a real row.
      const uint8_t* row = src + static_cast<size_t>(std::min(g * kFloatX16Rows + r, w.n_out - 1)) * row_bytes;
      for (int64_t i = 0; i < w.n_in; ++i) {
        std::memcpy(group + static_cast<size_t>(i * kFloatX16Rows + r) * element,
                    row + static_cast<size_t>(i) * element, element);
      }
    }
  }
}

size_t unpadded_packed_bytes(const WeightView& w) {
  if (is_float_dtype(w.type)) {
    return static_cast<size_t>(float_x16_groups(w) * w.n_in * kFloatX16Rows) *
           float_element_bytes(w.type);
  }
  return static_cast<size_t>(q4_0_x16_groups(w) * (w.n_in / 32)) * kQ4_0X16BlockBytes;
}

}  // namespace

PackedBytes allocate_packed_bytes(size_t bytes) {
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t alignment = bytes >= kHugePage ? kHugePage : kPackedWeightAlignment;
  const size_t rounded = (bytes + alignment - 1) / alignment * alignment;  // aligned_alloc's rule
  PackedBytes buffer(static_cast<uint8_t*>(std::aligned_alloc(alignment, rounded)));
  // Only advice: without huge pages the buffer works the same, a little slower.
  if (buffer != nullptr && alignment == kHugePage) ::madvise(buffer.get(), rounded, MADV_HUGEPAGE);
  return buffer;
}

bool weight_packable(KernelIsa isa, const WeightView& w) {
  if (isa != KernelIsa::AVX512 || w.layout != WeightLayout::ROWS || w.n_in <= 0 || w.n_out <= 0)
    return false;
  return is_float_dtype(w.type) || (w.type == DType::Q4_0 && w.n_in % 32 == 0);
}

size_t packed_weight_bytes(const WeightView& w) {
  const size_t bytes = unpadded_packed_bytes(w);
  return (bytes + kPackedWeightAlignment - 1) / kPackedWeightAlignment * kPackedWeightAlignment;
}

WeightView pack_weight(KernelIsa isa, const WeightView& w, uint8_t* dst) {
  assert(weight_packable(isa, w));
  assert(reinterpret_cast<uintptr_t>(dst) % kPackedWeightAlignment == 0);
  (void)isa;
  WeightView packed = w;
  packed.data = dst;
  if (is_float_dtype(w.type)) {
    pack_float_x16(w, dst);
    packed.layout = WeightLayout::FLOAT_X16;
  } else {
    pack_q4_0_x16(w, dst);
    packed.layout = WeightLayout::Q4_0_X16;
  }
  return packed;
}

}  // namespace trellis
