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

// The 16 x 16 matrix whose row e is r[e], transposed into `cols` (column e at cols + 16 e; r is
// used as scratch).
inline void transpose16x16(__m512 (&r)[16], float* cols) {
  __m512 t[16];
  // Per 128-bit chunk: pairs of rows interleaved, then quadruples: u[4g + k] holds, in chunk c,
  // element 4c + k of rows 4g .. 4g + 3.
  for (int e = 0; e < 16; e += 2) {
    t[e] = _mm512_unpacklo_ps(r[e], r[e + 1]);
    t[e + 1] = _mm512_unpackhi_ps(r[e], r[e + 1]);
  }
  for (int g = 0; g < 16; g += 4) {
    const __m512d a = _mm512_castps_pd(t[g]), b = _mm512_castps_pd(t[g + 1]);
    const __m512d c = _mm512_castps_pd(t[g + 2]), d = _mm512_castps_pd(t[g + 3]);
    r[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    r[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  // Column 4c + k gathers chunk c of r[k], r[4 + k], r[8 + k], r[12 + k].
  for (int k = 0; k < 4; ++k) {
    const __m512 v02 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x88);
    const __m512 v13 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xdd);
    const __m512 w02 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x88);
    const __m512 w13 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xdd);
    _mm512_storeu_ps(cols + 16 * k, _mm512_shuffle_f32x4(v02, w02, 0x88));
    _mm512_storeu_ps(cols + 16 * (8 + k), _mm512_shuffle_f32x4(v02, w02, 0xdd));
    _mm512_storeu_ps(cols + 16 * (4 + k), _mm512_shuffle_f32x4(v13, w13, 0x88));
    _mm512_storeu_ps(cols + 16 * (12 + k), _mm512_shuffle_f32x4(v13, w13, 0xdd));
  }
}

}  // namespace trellis::kernels_detail::avx512
