// What the AVX-512 attention kernels share (the per-row one, attention_avx512.cpp, and the one
// over tiles of rows, attention_tile_avx512.cpp): loads of f16 or f32 rows, keys and values
// widened to f32, the exponentials, the softmax of a query's scores. Internal linkage, like
// kernels/attend_head_common.h, so that no copy compiled here can stand in for code built for a
// smaller instruction set (see avx512_util.h).
#pragma once

#include <immintrin.h>
#include <math.h>

#include <cstdint>

#include "kernels/x86/avx512/attention_avx512.h"
#include "kv/kv_storage.h"

namespace trellis::kernels_detail {
namespace {

// The first min(n, 16) lanes.
inline __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

// The head_dim values at p (f16 or f32) as vectors; the last one keeps `tail` lanes.
inline __m512 load16(const uint8_t* p, bool f16, __mmask16 lanes) {
  if (f16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes, p));
  return _mm512_maskz_loadu_ps(lanes, p);
}

// e^x for x <= 0 (scores minus their maximum), lane by lane: x = n ln2 + r with |r| <= ln2 / 2
// (ln2 split in two so that n ln2 is exact), e^r by the degree-6 minimax polynomial of Cephes'
// expf (relative error below 2^-23 on that range), then times 2^n by vscalefps, which also
// underflows smoothly to 0 for very negative x.
inline __m512 exp16(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));  // e^-104 is 0 in f32; keeps n in range
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

// Row `j - begin` of a run as a pointer to its first element; `elem` bytes per element.
struct RunView {
  const uint8_t* data;
  size_t row_bytes;
  size_t elem;
  bool f16;
};

// The f16 scale at the start of a q8_0 or q4_0 block, as f32 in every lane.
inline __m512 block_scale(const uint8_t* block) {
  unsigned short h;
  __builtin_memcpy(&h, block, 2);
  return _mm512_set1_ps(_cvtsh_ss(h));
}

// Widens rows [0, n) of a run to f32 in `buffer` (head_dim floats per row), so that the loops
// that read it see f32 rows only: the query heads that share an f16 run read it without
// converting it again, and quantized rows are decoded once per run, not once per head. The
// values are those of kv_decode_row (a code times its scale is one f32 product), which are also
// the ones an f16 row widened on the fly gives, so results do not change.
inline RunView widen_run(const uint8_t* run, int64_t n, int64_t head_dim, KvType type,
                         size_t row_bytes, float* buffer) {
  const int64_t n_vec = (head_dim + 15) / 16;
  const __mmask16 tail = head_dim % 16 == 0 ? 0xffff : static_cast<__mmask16>(0xff);
  for (int64_t s = 0; s < n; ++s) {
    const uint8_t* src = run + static_cast<size_t>(s) * row_bytes;
    float* dst = buffer + s * head_dim;
    if (type == KvType::Q8_0) {  // 34-byte blocks: scale, 32 codes -> vectors 2b, 2b + 1
      for (int64_t b = 0; b < head_dim / 32; ++b) {
        const uint8_t* block = src + 34 * b;
        const __m512 d = block_scale(block);
        for (int half = 0; half < 2; ++half) {
          const __m128i codes =
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2 + 16 * half));
          _mm512_storeu_ps(dst + 32 * b + 16 * half,
                           _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(codes)), d));
        }
      }
    } else if (type == KvType::Q4_0) {  // 18-byte blocks: scale, low nibbles 0..15, high 16..31
      for (int64_t b = 0; b < head_dim / 32; ++b) {
        const uint8_t* block = src + 18 * b;
        const __m512 d = block_scale(block);
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
        const __m128i mask = _mm_set1_epi8(0x0f);
        const __m128i nibbles[2] = {_mm_and_si128(bytes, mask),
                                    _mm_and_si128(_mm_srli_epi16(bytes, 4), mask)};
        for (int half = 0; half < 2; ++half) {
          const __m512i codes =
              _mm512_sub_epi32(_mm512_cvtepu8_epi32(nibbles[half]), _mm512_set1_epi32(8));
          _mm512_storeu_ps(dst + 32 * b + 16 * half, _mm512_mul_ps(_mm512_cvtepi32_ps(codes), d));
        }
      }
    } else {
      const bool f16 = type == KvType::F16;
      const size_t elem = f16 ? 2 : 4;
      for (int64_t i = 0; i < n_vec; ++i) {
        const __mmask16 lanes = i + 1 < n_vec ? 0xffff : tail;
        _mm512_mask_storeu_ps(dst + 16 * i, lanes, load16(src + 16 * i * elem, f16, lanes));
      }
    }
  }
  return {reinterpret_cast<const uint8_t*>(buffer), static_cast<size_t>(head_dim) * 4, 4, false};
}

// Whether runs of `type` are widened before use: quantized ones always, f16 ones when more than
// one head reads them (otherwise converting on the fly costs less than the round trip).
inline bool widens(KvType type, int64_t n_q) {
  return type == KvType::Q8_0 || type == KvType::Q4_0 || (type == KvType::F16 && n_q > 1);
}

// The largest of `max_score` (the sink's logit, or -infinity) and scores[0, n).
inline float max_score_of(const float* scores, int64_t n, float max_score) {
  __m512 max16 = _mm512_set1_ps(max_score);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = first_lanes(n - i);
    max16 = _mm512_mask_max_ps(max16, lanes, max16, _mm512_maskz_loadu_ps(lanes, scores + i));
  }
  return _mm512_reduce_max_ps(max16);
}

// One query head's scores[0, n) become its softmax weights, given their maximum (which counts the
// sink): exp(score - max) / sum, the sum taken sixteen lanes at a time plus exp(sink - max)
// (sink -infinity: none). `lse` (a piece of a split row, no sink): max + log(sum) goes there.
inline void softmax_in_place(float* scores, int64_t n, float max_score, float sink, float* lse) {
  __m512 total = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = first_lanes(n - i);
    const __m512 e =
        exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(lanes, scores + i), _mm512_set1_ps(max_score)));
    _mm512_mask_storeu_ps(scores + i, lanes, e);
    total = _mm512_add_ps(total, _mm512_maskz_mov_ps(lanes, e));
  }
  // The weights e_j / sum, sixteen at a time: the same products the output loop would form one
  // position at a time, taken out of it.
  const float sum = _mm512_reduce_add_ps(total) + expf(sink - max_score);
  if (lse != nullptr) *lse = max_score + logf(sum);
  const __m512 inv = _mm512_set1_ps(1.0f / sum);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = first_lanes(n - i);
    _mm512_mask_storeu_ps(scores + i, lanes,
                          _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, scores + i), inv));
  }
}

}  // namespace
}  // namespace trellis::kernels_detail
