// Helpers shared by the AVX-512 translation units (compiled with AVX-512 F, BW, VL and VNNI on
// top of the AVX2 flags).
//
// They live in namespace avx512 and are used only from x86/avx512/ files, for the reason
// x86/avx2_util.h gives: an inline function that code for a smaller ISA also instantiates could
// be merged by the linker with the copy compiled here and then run on a CPU without AVX-512. So
// these files include neither avx2_util.h nor library templates.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/matmul_internal.h"

namespace trellis::kernels_detail::avx512 {

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

inline int32_t load_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline float f16_bits_to_f32(uint16_t h) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

// Sum of eight int32 lanes (exact within the callers' bounds).
inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// Into L2, not L1: the tiles prefetch the whole next 16-row tile (16 rows x a whole row: 18 KiB
// for a Q4_0 row of 2048, 26 KiB for Q6_K) while the current one is still being read, and two
// tiles do not fit the 32 KiB L1; prefetched lines then evicted the current tile's lines before
// their use (decode of Q6_K ran at half speed). The L1 fill from L2 is the hardware's.
inline void prefetch(const uint8_t* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1);
}

}  // namespace trellis::kernels_detail::avx512
