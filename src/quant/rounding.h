// Rounding helpers shared by the scalar quantizers (quantize.cpp, quantize_k.cpp).
#pragma once

#include <cmath>

namespace trellis::quant_detail {

// roundf: nearest integer, halves away from zero, for |v| < 2^23. Written out because roundf is a
// library call on baseline x86-64. v - trunc(v) is exact in that range, so the comparison with
// 0.5 decides exactly; adding 0.5 before truncating would not (0.49999997f + 0.5f rounds to 1).
inline int round_half_away_from_zero(float v) {
  int i = static_cast<int>(v);
  const float fraction = v - static_cast<float>(i);
  i += (fraction >= 0.5f) - (fraction <= -0.5f);
  return i;
}

// The value of largest magnitude in x[0, n), sign kept; the first one wins a tie of magnitudes.
inline float signed_absmax(const float* x, int n) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (amax < std::fabs(x[i])) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  return max;
}

}  // namespace trellis::quant_detail
