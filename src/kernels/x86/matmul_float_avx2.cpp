// AVX2 matmul for float weights (F32, F16, BF16): contract case 1 of matmul_internal.h. Lane j of
// an element's accumulator holds the products of i = j mod 8, added in increasing i with a
// separate multiply and add; a tail shorter than 8 is padded with zeros (adding +0 * +0 leaves a
// lane unchanged: a lane that starts at +0 is never -0).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/x86/avx2_util.h"
#include "kernels/x86/kernels_avx2.h"

namespace trellis::kernels_detail::avx2 {
namespace {

struct LoadF32 {
  static constexpr int kBytes = 4;
  static __m256 load8(const uint8_t* p) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  }
};
struct LoadF16 {
  static constexpr int kBytes = 2;
  static __m256 load8(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};
struct LoadBF16 {
  static constexpr int kBytes = 2;
  static __m256 load8(const uint8_t* p) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
  }
};

template <class Load>
struct FloatTile {
  template <int R, int T>
  struct Kernel {
    static void run(const MatmulArgs& a, int64_t o, int64_t t0) {
      const auto [w, x] = tile_at<R, T>(a, o, t0);
      __m256 acc[R][T];
      for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();

      const int64_t n8 = a.n_in / 8 * 8;
      for (int64_t i = 0; i < n8; i += 8) {
        __m256 wv[R];
        for (int r = 0; r < R; ++r) {
          if (i % 32 == 0) prefetch_ahead(w[r] + i * Load::kBytes, 1);  // once per 32 values
          wv[r] = Load::load8(w[r] + i * Load::kBytes);
        }
        for (int t = 0; t < T; ++t) {
          const __m256 xv = _mm256_loadu_ps(reinterpret_cast<const float*>(x[t] + i * 4));
          for (int r = 0; r < R; ++r)
            acc[r][t] = _mm256_add_ps(acc[r][t], _mm256_mul_ps(wv[r], xv));
        }
      }
      if (n8 < a.n_in) {
        const auto rest = static_cast<size_t>(a.n_in - n8);
        for (int r = 0; r < R; ++r) {
          uint8_t wbuf[32] = {};
          std::memcpy(wbuf, w[r] + n8 * Load::kBytes, rest * Load::kBytes);
          const __m256 wv = Load::load8(wbuf);
          for (int t = 0; t < T; ++t) {
            float xbuf[8] = {};
            std::memcpy(xbuf, x[t] + n8 * 4, rest * 4);
            acc[r][t] = _mm256_add_ps(acc[r][t], _mm256_mul_ps(wv, _mm256_loadu_ps(xbuf)));
          }
        }
      }
      for (int t = 0; t < T; ++t)
        for (int r = 0; r < R; ++r) a.out[(t0 + t) * a.n_out + o + r] = hsum8(acc[r][t]);
    }
  };
};

template <int R, int T>
using F32Kernel = FloatTile<LoadF32>::Kernel<R, T>;
template <int R, int T>
using F16Kernel = FloatTile<LoadF16>::Kernel<R, T>;
template <int R, int T>
using BF16Kernel = FloatTile<LoadBF16>::Kernel<R, T>;

}  // namespace

// Prefill tiles of 3 rows x 4 tokens: 12 accumulators + 3 weights + 1 activation registers.
void matmul_f32(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_tiles<F32Kernel, 3, 4, 4>(a, b, e);
}
void matmul_f16(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_tiles<F16Kernel, 3, 4, 4>(a, b, e);
}
void matmul_bf16(const MatmulArgs& a, int64_t b, int64_t e) {
  drive_tiles<BF16Kernel, 3, 4, 4>(a, b, e);
}

}  // namespace trellis::kernels_detail::avx2
