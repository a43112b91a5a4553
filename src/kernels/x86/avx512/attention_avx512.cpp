// AVX-512 attention for one (query row, head) pair; see kernels/attention.h for the math.
//
// Against the AVX2 kernel: 16-lane vectors (a 64-wide head is four of them), two independent
// chains per score, and the softmax exponentials sixteen at a time with a polynomial (within a
// few ulp of expf; see exp16) instead of one libm call per position.
#include "kernels/x86/avx512/attention_avx512.h"

#include <immintrin.h>
#include <math.h>

namespace trellis::kernels_detail {
namespace {

constexpr int64_t kMaxVectors = kAttendAvx512MaxHeadDim / 16;

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

// Lane e of the result: the sum of the 16 lanes of v[e], in a fixed order (pairs of lanes, then
// within 128-bit chunks, then across the chunks).
inline __m512 sum16(const __m512 v[16]) {
  __m512 pair[8], quad[4];
  for (int e = 0; e < 8; ++e) {
    // Per 128-bit chunk: [a0 + a2, b0 + b2, a1 + a3, b1 + b3] for a = v[2e], b = v[2e + 1].
    pair[e] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * e], v[2 * e + 1]),
                            _mm512_unpackhi_ps(v[2 * e], v[2 * e + 1]));
  }
  for (int g = 0; g < 4; ++g) {
    // Per chunk: the chunk sums of v[4g], v[4g + 1], v[4g + 2], v[4g + 3].
    const __m512 ab = pair[2 * g], cd = pair[2 * g + 1];
    quad[g] = _mm512_add_ps(_mm512_shuffle_ps(ab, cd, 0x44), _mm512_shuffle_ps(ab, cd, 0xee));
  }
  // Chunks c of quad[g] -> lane group g: fold chunks 2, 3 onto 0, 1, then 1 onto 0.
  const __m512 x = _mm512_add_ps(_mm512_shuffle_f32x4(quad[0], quad[1], 0x44),
                                 _mm512_shuffle_f32x4(quad[0], quad[1], 0xee));
  const __m512 y = _mm512_add_ps(_mm512_shuffle_f32x4(quad[2], quad[3], 0x44),
                                 _mm512_shuffle_f32x4(quad[2], quad[3], 0xee));
  return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x88), _mm512_shuffle_f32x4(x, y, 0xdd));
}

// The keys or values of positions [first_position, position] of one row and kv head, visited in
// order. The block addresses come from out-of-line calls; taking them for up to kBlocks blocks
// before visiting their positions keeps those calls (which clobber every vector register) out of
// the loop that carries the accumulators.
struct RowRuns {
  static constexpr int kBlocks = 64;
  const KvStorage& kv;
  const AttentionRow& row;
  int64_t layer;
  int64_t kv_head;
  size_t row_bytes;

  // fn(j, end, pointer to position j's key or value row) for runs [j, end) of positions in one
  // block (rows row_bytes apart), in order, covering first_position .. position.
  template <class Fn>
  void for_each(bool keys, Fn&& fn) const {
    const int64_t block_size = kv.layout().block_size;
    const int64_t n_pos = static_cast<int64_t>(row.position) + 1;
    const uint8_t* base[kBlocks];
    for (int64_t j = row.first_position; j < n_pos;) {
      const int64_t first_block = j / block_size;
      int64_t n_blocks = 0;
      for (; n_blocks < kBlocks && (first_block + n_blocks) * block_size < n_pos; ++n_blocks) {
        const int32_t id = row.block_table[first_block + n_blocks];
        base[n_blocks] = keys ? kv.keys(id, layer, kv_head) : kv.values(id, layer, kv_head);
      }
      for (int64_t b = 0; b < n_blocks; ++b) {
        const int64_t start = (first_block + b) * block_size;  // position of slot 0
        const int64_t end = start + block_size < n_pos ? start + block_size : n_pos;
        if (j < end) fn(j, end, base[b] + static_cast<size_t>(j - start) * row_bytes);
        j = end > j ? end : j;
      }
    }
  }
};

// kVec > 0: head_dim == 16 kVec, known at compile time, so that the accumulators stay in
// registers; kVec == 0: any head_dim (a multiple of 8), the vectors indexed at run time.
template <int kVec>
void attend(const KvStorage& kv, int64_t layer, int64_t kv_head, const AttentionRow& row,
            const float* q, float* out, float* scores) {
  const KvLayout& layout = kv.layout();
  const int64_t head_dim = layout.head_dim;
  const int64_t n_vec = kVec > 0 ? kVec : (head_dim + 15) / 16;
  const __mmask16 tail = kVec > 0 || head_dim % 16 == 0 ? 0xffff : static_cast<__mmask16>(0xff);
  const bool f16 = layout.type == KvType::F16;
  const size_t elem = layout.element_bytes();
  const size_t row_bytes = static_cast<size_t>(head_dim) * elem;
  const int64_t first = row.first_position;
  const int64_t n_pos = static_cast<int64_t>(row.position) + 1;
  const float scale = 1.0f / sqrtf(static_cast<float>(head_dim));

  constexpr int64_t kSlots = kVec > 0 ? kVec : kMaxVectors;
  __m512 qv[kSlots];
  for (int64_t i = 0; i < n_vec; ++i)
    qv[i] = _mm512_maskz_loadu_ps(i + 1 < n_vec ? 0xffff : tail, q + 16 * i);

  // Scores: scores[i] holds position first + i.
  __m512 max16 = _mm512_set1_ps(-INFINITY);
  const RowRuns runs{kv, row, layer, kv_head, row_bytes};
  runs.for_each(true, [&](int64_t begin, int64_t end, const uint8_t* run) {
    // Sixteen positions at a time (zeros past the run's end), so that their lane sums share
    // one reduction (sum16); a position's score depends only on its own key either way.
    for (int64_t j = begin; j < end; j += 16) {
      __m512 dots[16];
      for (int e = 0; e < 16; ++e) {
        dots[e] = _mm512_setzero_ps();
        if (j + e >= end) continue;
        const uint8_t* k = run + static_cast<size_t>(j + e - begin) * row_bytes;
        __m512 even = _mm512_setzero_ps(), odd = _mm512_setzero_ps();
        for (int64_t i = 0; i < n_vec; i += 2) {
          even = _mm512_fmadd_ps(
              qv[i], load16(k + 16 * i * elem, f16, i + 1 < n_vec ? 0xffff : tail), even);
          if (i + 1 < n_vec) {
            odd = _mm512_fmadd_ps(
                qv[i + 1], load16(k + 16 * (i + 1) * elem, f16, i + 2 < n_vec ? 0xffff : tail),
                odd);
          }
        }
        dots[e] = _mm512_add_ps(even, odd);
      }
      const int64_t n = end - j < 16 ? end - j : 16;
      const __mmask16 lanes = static_cast<__mmask16>((1u << n) - 1);
      const __m512 score = _mm512_mul_ps(sum16(dots), _mm512_set1_ps(scale));
      _mm512_mask_storeu_ps(scores + (j - first), lanes, score);
      max16 = _mm512_mask_max_ps(max16, lanes, max16, score);
    }
  });
  const float max_score = _mm512_reduce_max_ps(max16);
  const int64_t n_scores = n_pos - first;
  __m512 sum16 = _mm512_setzero_ps();
  for (int64_t i = 0; i < n_scores; i += 16) {
    const __mmask16 lanes =
        n_scores - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n_scores - i)) - 1);
    const __m512 e =
        exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(lanes, scores + i), _mm512_set1_ps(max_score)));
    _mm512_mask_storeu_ps(scores + i, lanes, e);
    sum16 = _mm512_add_ps(sum16, _mm512_maskz_mov_ps(lanes, e));
  }
  const __m512 inv_sum = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum16));

  __m512 acc[kSlots];
  for (int64_t i = 0; i < n_vec; ++i) acc[i] = _mm512_setzero_ps();
  runs.for_each(false, [&](int64_t begin, int64_t end, const uint8_t* run) {
    // A local copy per run: no call inside the run, so it can stay in registers.
    __m512 a[kSlots];
    for (int64_t i = 0; i < n_vec; ++i) a[i] = acc[i];
    for (int64_t j = begin; j < end; ++j) {
      const __m512 p = _mm512_mul_ps(_mm512_set1_ps(scores[j - first]), inv_sum);
      const uint8_t* v = run + static_cast<size_t>(j - begin) * row_bytes;
#pragma GCC unroll 16
      for (int64_t i = 0; i < n_vec; ++i)
        a[i] =
            _mm512_fmadd_ps(p, load16(v + 16 * i * elem, f16, i + 1 < n_vec ? 0xffff : tail), a[i]);
    }
    for (int64_t i = 0; i < n_vec; ++i) acc[i] = a[i];
  });
  for (int64_t i = 0; i < n_vec; ++i)
    _mm512_mask_storeu_ps(out + 16 * i, i + 1 < n_vec ? 0xffff : tail, acc[i]);
}

}  // namespace

void attend_head_avx512(const KvStorage& kv, int64_t layer, int64_t kv_head,
                        const AttentionRow& row, const float* q, float* out, float* scores) {
  switch (kv.layout().head_dim) {
    case 64:
      return attend<4>(kv, layer, kv_head, row, q, out, scores);
    case 128:
      return attend<8>(kv, layer, kv_head, row, q, out, scores);
    default:
      return attend<0>(kv, layer, kv_head, row, q, out, scores);
  }
}

}  // namespace trellis::kernels_detail
