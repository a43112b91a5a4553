#include "kernels/x86/attention_avx2.h"

#include "kernels/attend_head_common.h"
#include "kernels/matmul_internal.h"

// Compiled with AVX2: no std:: templates here (see avx2_util.h for why).

#include <immintrin.h>
#include <math.h>

namespace trellis::kernels_detail {
namespace {

// Elements [8i, 8i + 8) of a key or value row of type kType as f32: the values of
// kv_decode_row (a code times its block's scale is one f32 product here too).
template <KvType kType>
inline __m256 load8(const uint8_t* row, int64_t i) {
  if constexpr (kType == KvType::F16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 16 * i)));
  } else if constexpr (kType == KvType::F32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row + 32 * i));
  } else {
    // q8_0: 34-byte blocks (f16 scale, 32 codes); q4_0: 18-byte blocks (f16 scale, then 16 bytes
    // whose low nibbles are elements 0..15 and high nibbles 16..31, each code offset by 8).
    const int64_t part = i % 4;  // which 8 of the block's 32 elements
    const uint8_t* block = row + (kType == KvType::Q8_0 ? 34 : 18) * (i / 4);
    unsigned short h;
    __builtin_memcpy(&h, block, 2);
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(h));
    __m256i codes;
    if constexpr (kType == KvType::Q8_0) {
      codes = _mm256_cvtepi8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 2 + 8 * part)));
    } else {
      __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 2 + 8 * (part % 2)));
      if (part >= 2) bytes = _mm_srli_epi16(bytes, 4);
      bytes = _mm_and_si128(bytes, _mm_set1_epi8(0x0f));
      codes = _mm256_sub_epi32(_mm256_cvtepu8_epi32(bytes), _mm256_set1_epi32(8));
    }
    return _mm256_mul_ps(_mm256_cvtepi32_ps(codes), d);
  }
}

// Sum of the 8 lanes in a fixed order: (0+4, 1+5, 2+6, 3+7), then pairs, then the last two.
inline float horizontal_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

static_assert(kAttendAvx2MaxHeadDim == kAttendSimdMaxHeadDim);

// The vector operations of attend_head_simd, eight lanes.
struct Avx2Ops {
  using Vec = __m256;
  static constexpr int64_t kLanes = 8;
  template <KvType kType>
  static Vec load(const uint8_t* row, int64_t i) {
    return load8<kType>(row, i);
  }
  static Vec load_f32(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec fma(Vec a, Vec b, Vec acc) { return _mm256_fmadd_ps(a, b, acc); }
  static Vec fma_scalar(Vec acc, Vec v, float p) {
    return _mm256_fmadd_ps(_mm256_set1_ps(p), v, acc);
  }
  static float sum(Vec v) { return horizontal_sum(v); }
};

}  // namespace

void attend_head_avx2(const KvStorage& kv, int64_t layer, int64_t kv_head, const AttentionRow& row,
                      const float* q, float* out, float* scores, float sink) {
  attend_head_for<Avx2Ops>(kv.layout().types)(kv, layer, kv_head, row, q, out, scores, sink);
}

}  // namespace trellis::kernels_detail
