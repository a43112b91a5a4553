// Small helpers shared by the NEON kernel files: unaligned scalar loads from GGUF block bytes.
#pragma once

#include <cstdint>
#include <cstring>

namespace trellis::kernels_detail::neon {

inline float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

}  // namespace trellis::kernels_detail::neon
