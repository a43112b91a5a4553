// mxfp4: 32 E2M1 values sharing one power-of-two scale (block_types.h has the layout).
#include <cmath>
#include <cstring>

#include "quant/block_types.h"
#include "quant/codecs.h"

namespace trellis::quant_detail {
namespace {

// The code whose value (in the doubled units of kMxfp4Values) is nearest to v; the smaller
// magnitude wins a tie, the sign is v's; beyond the largest value (infinity too) the largest;
// NaN: 0.
uint8_t nearest_code(float v) {
  if (std::isnan(v)) return 0;
  const float a = std::fabs(v);
  uint8_t best = 7;
  if (a < kMxfp4Values[7]) {
    best = 0;
    for (uint8_t q = 1; q < 8; ++q) {
      if (std::fabs(a - kMxfp4Values[q]) < std::fabs(a - kMxfp4Values[best])) best = q;
    }
  }
  return static_cast<uint8_t>(best | (v < 0 && best != 0 ? 8 : 0));
}

}  // namespace

void dequantize_mxfp4(const void* src, float* dst, int64_t n_blocks) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n_blocks; ++b) {
    block_mxfp4 block;
    std::memcpy(&block, bytes + b * sizeof(block_mxfp4), sizeof(block));
    const float d = mxfp4_scale(block.e);
    float* out = dst + b * kQk;
    for (int l = 0; l < kQk / 2; ++l) {
      out[l] = kMxfp4Values[block.qs[l] & 0x0f] * d;
      out[l + kQk / 2] = kMxfp4Values[block.qs[l] >> 4] * d;
    }
  }
}

// The scale puts the block's largest magnitude amax in [8, 16) doubled units, so that it rounds
// to the largest codes (8 or 12); e = floor(log2(amax)) + 125, as the OCP format's reference
// quantizers choose it. An all-zero block gets e = 0.
void quantize_mxfp4(const float* src, void* dst, int64_t n_blocks) {
  auto* bytes = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float* x = src + b * kQk;
    float amax = 0.0f;
    for (int i = 0; i < kQk; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    block_mxfp4 block{};
    if (!std::isfinite(amax)) {
      block.e = 254;  // the largest scale the quantizer uses: infinities saturate to ±12 units
    } else if (amax > 0.0f) {
      const int e = static_cast<int>(std::floor(std::log2(amax))) + 125;
      block.e = static_cast<uint8_t>(e < 0 ? 0 : e > 254 ? 254 : e);
    }
    const float inverse = amax > 0.0f ? 1.0f / mxfp4_scale(block.e) : 0.0f;
    for (int l = 0; l < kQk / 2; ++l) {
      block.qs[l] = static_cast<uint8_t>(nearest_code(x[l] * inverse) |
                                         nearest_code(x[l + kQk / 2] * inverse) << 4);
    }
    std::memcpy(bytes + b * sizeof(block_mxfp4), &block, sizeof(block));
  }
}

}  // namespace trellis::quant_detail
