// NEON paged attention for one query head (an AttendHeadKernel): keys and values are read from
// their f16, f32, q8_0 or q4_0 rows four elements at a time and widened in registers (no
// dequantized copy), products fused (vfmaq), each dot product summed over its four lanes. Like the
// AVX2 kernel it agrees with the scalar one within the bound of tests/unit/kernels/
// attention_test.cpp, not bit for bit; within this kernel the batch and thread invariance hold.
#include <arm_neon.h>

#include <cstring>

#include "kernels/arm/kernels_neon.h"
#include "kernels/arm/neon_util.h"
#include "kernels/attend_head_common.h"
#include "kernels/attention.h"
#include "kv/kv_storage.h"
#include "quant/half.h"

namespace trellis::kernels_detail::neon {
namespace {

// Elements [4 i, 4 i + 4) of one key or value row stored as kType, as f32 (a quantized code
// times its block's scale: kv_decode_row's values).
template <KvType kType>
inline float32x4_t load4(const uint8_t* row, int64_t i) {
  if constexpr (kType == KvType::F32) {
    return vld1q_f32(reinterpret_cast<const float*>(row) + 4 * i);
  } else if constexpr (kType == KvType::F16) {
    uint16_t h[4];
    std::memcpy(h, row + 8 * i, sizeof(h));
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
  } else if constexpr (kType == KvType::Q8_0) {
    const uint8_t* block = row + (4 * i / 32) * 34;  // f16 scale, 32 int8 codes
    uint32_t word;
    std::memcpy(&word, block + 2 + 4 * i % 32, sizeof(word));
    const int16x8_t codes = vmovl_s8(vreinterpret_s8_u32(vdup_n_u32(word)));
    return vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(codes))), f16_to_f32(load_u16(block)));
  } else {
    // q4_0: f16 scale, then 16 bytes: element e < 16 in byte e's low nibble, e >= 16 in byte
    // e - 16's high nibble; a code c stands for c - 8.
    const uint8_t* block = row + (4 * i / 32) * 18;
    const int64_t e = 4 * i % 32;
    uint32_t word;
    std::memcpy(&word, block + 2 + e % 16, sizeof(word));
    const uint8x8_t bytes = vreinterpret_u8_u32(vdup_n_u32(word));
    const uint8x8_t nibbles = e >= 16 ? vshr_n_u8(bytes, 4) : vand_u8(bytes, vdup_n_u8(0x0f));
    const int16x8_t codes = vreinterpretq_s16_u16(vmovl_u8(nibbles));
    const int32x4_t centred = vsubq_s32(vmovl_s16(vget_low_s16(codes)), vdupq_n_s32(8));
    return vmulq_n_f32(vcvtq_f32_s32(centred), f16_to_f32(load_u16(block)));
  }
}

static_assert(kAttendNeonMaxHeadDim == kAttendSimdMaxHeadDim);

// The vector operations of attend_head_simd, four lanes.
struct NeonOps {
  using Vec = float32x4_t;
  static constexpr int64_t kLanes = 4;
  template <KvType kType>
  static Vec load(const uint8_t* row, int64_t i) {
    return load4<kType>(row, i);
  }
  static Vec load_f32(const float* p) { return vld1q_f32(p); }
  static void store(float* p, Vec v) { vst1q_f32(p, v); }
  static Vec zero() { return vdupq_n_f32(0.0f); }
  static Vec mul(Vec a, Vec b) { return vmulq_f32(a, b); }
  static Vec fma(Vec a, Vec b, Vec acc) { return vfmaq_f32(acc, a, b); }
  static Vec fma_scalar(Vec acc, Vec v, float p) { return vfmaq_n_f32(acc, v, p); }
  static float sum(Vec v) { return vaddvq_f32(v); }
};

}  // namespace

void attend_head(const KvStorage& kv, int64_t layer, int64_t kv_head, const AttentionRow& row,
                 const float* q, float* out, float* scores, float sink) {
  attend_head_for<NeonOps>(kv.layout().types)(kv, layer, kv_head, row, q, out, scores, sink);
}

}  // namespace trellis::kernels_detail::neon
