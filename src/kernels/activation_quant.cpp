// Scalar activation quantization to ActQ8_0 / ActQ8_K: the reference that the SIMD quantizers
// reproduce bit for bit (see the contract in matmul_internal.h).
#include <cstdint>
#include <cstring>

#include "kernels/matmul_internal.h"

namespace trellis::kernels_detail {
namespace {

// Round half to even for |v| <= 2^22: adding 1.5 * 2^23 leaves no fraction bits, so the addition
// itself rounds (to nearest even, the default mode); subtracting it again is exact.
float round_half_even(float v) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return (v + kMagic) - kMagic;
}

// Quantizes n values (n a multiple of 16) with one scale; writes the codes and returns the scale.
float quantize_block(const float* x, int n, int8_t* qs) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float a = x[i] < 0.0f ? -x[i] : x[i];
    amax = a > amax ? a : amax;
  }
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int i = 0; i < n; ++i) {
    float q = round_half_even(x[i] * id);
    q = q < -127.0f ? -127.0f : q;
    q = q > 127.0f ? 127.0f : q;
    qs[i] = static_cast<int8_t>(q);
  }
  return d;
}

}  // namespace

void quantize_act_q8_0_scalar(const float* x, void* out, int64_t n_in) {
  auto* blocks = static_cast<ActQ8_0*>(out);
  for (int64_t b = 0; b < n_in / 32; ++b) {
    ActQ8_0 block;
    block.d = quantize_block(x + 32 * b, 32, block.qs);
    int sum = 0;
    for (int i = 0; i < 32; ++i) sum += block.qs[i];
    block.s = block.d * static_cast<float>(sum);
    std::memcpy(&blocks[b], &block, sizeof(block));
  }
}

void quantize_act_q8_k_scalar(const float* x, void* out, int64_t n_in) {
  auto* blocks = static_cast<ActQ8_K*>(out);
  for (int64_t b = 0; b < n_in / 256; ++b) {
    ActQ8_K block;
    block.d = quantize_block(x + 256 * b, 256, block.qs);
    for (int k = 0; k < 16; ++k) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += block.qs[16 * k + i];
      block.bsums[k] = static_cast<int16_t>(sum);
    }
    std::memcpy(&blocks[b], &block, sizeof(block));
  }
}

}  // namespace trellis::kernels_detail
