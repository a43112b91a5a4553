// Helpers shared by the AVX2 translation units (compiled with -mavx2 -mfma -mf16c only).
//
// Everything here lives in namespace avx2 and is used only from x86/ files: an inline function
// that baseline code also instantiates (std:: templates, half.h) could otherwise be merged by the
// linker with an AVX2-compiled copy and run on a CPU without AVX2. So x86/ files avoid library
// templates and the inline helpers of other modules, and use the ones below instead.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/matmul_internal.h"
#include "kernels/tiling.h"

namespace trellis::kernels_detail::avx2 {

// Weights stream from memory once per token. Fetching this far ahead of the tile's rows (into the
// next tiles) lets decode approach the memory bandwidth; the hardware prefetcher alone leaves most
// of it unused on interleaved rows over 4 KiB pages (measured: 3.5 -> 9 GB/s per thread for q4_0).
constexpr int kPrefetchBytes = 4096;

// Prefetches `bytes` (at most a few cache lines) starting kPrefetchBytes past `p`.
inline void prefetch_ahead(const uint8_t* p, int bytes) {
  for (int offset = 0; offset < bytes; offset += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p) + kPrefetchBytes + offset, _MM_HINT_T0);
  }
}

// ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)): the contract's hsum8.
inline float hsum8(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));  // lanes 0, 1: s0 + s2, s1 + s3
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

// Sum of eight int32 lanes (exact unless it overflows, which the callers' bounds exclude).
inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

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

// f16 bits -> f32 with F16C (exact, as half.h's f16_to_f32).
inline float f16_bits_to_f32(uint16_t h) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

// Sixteen int16 pairs of u8 x s8 products summed into eight int32 lanes: lane j gets bytes
// 4j .. 4j+3. Precondition: each pair sum fits int16 (|u| * 127 * 2 <= 32767 for u <= 128).
inline __m256i dot_u8_s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// Lane p of the result: the sum of v[p]'s eight int32 lanes (p < P <= 8; lanes from P on are 0).
// Integer sums are exact, so the order of this tree is free.
template <int P>
inline __m256i lane_sums(const __m256i* v) {
  static_assert(P >= 1 && P <= 8);
  if constexpr (P <= 4) {  // one round of four, its halves added across
    const __m256i zero = _mm256_setzero_si256();
    const __m256i h01 = _mm256_hadd_epi32(v[0], P > 1 ? v[1] : zero);
    const __m256i h23 = P > 2 ? _mm256_hadd_epi32(v[2], P > 3 ? v[3] : zero) : zero;
    const __m256i h = _mm256_hadd_epi32(h01, h23);
    return _mm256_zextsi128_si256(
        _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
  }
  __m256i u[8];
  for (int p = 0; p < 8; ++p) u[p] = p < P ? v[p] : _mm256_setzero_si256();
  // hadd(a, b) per 128-bit half: a0+a1, a2+a3, b0+b1, b2+b3; twice gives, per half, the sums
  // of four vectors' halves; the two halves are then added across.
  const __m256i h0123 =
      _mm256_hadd_epi32(_mm256_hadd_epi32(u[0], u[1]), _mm256_hadd_epi32(u[2], u[3]));
  const __m256i h4567 =
      _mm256_hadd_epi32(_mm256_hadd_epi32(u[4], u[5]), _mm256_hadd_epi32(u[6], u[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(h0123, h4567, 0x20),
                          _mm256_permute2x128_si256(h0123, h4567, 0x31));
}

// The vector whose lane r * T + t is value(r, t) (lanes from R * T on: 0).
template <int R, int T, class Value>
[[gnu::always_inline]] inline __m256 pair_lanes(Value value) {
  float v[8];
  for (int p = 0; p < 8; ++p) v[p] = p < R * T ? value(p / T, p % T) : 0.0f;
  return _mm256_setr_ps(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
}

// An empty barrier on v: without it GCC regroups the integer additions into trees whose partial
// sums spill to the stack (measured: a third more instructions per super-block).
inline void pin_to_register(__m256i& v) {
  asm("" : "+x"(v));
}

}  // namespace trellis::kernels_detail::avx2
