// AVX-512 attention for one (query row, head) pair; see kernels/attention.h for the math.
//
// Against the AVX2 kernel: 16-lane vectors (a 64-wide head is four of them), two independent
// chains per score, and the softmax exponentials sixteen at a time with a polynomial (within a
// few ulp of expf; see exp16) instead of one libm call per position.
#include "kernels/x86/avx512/attention_avx512.h"

#include <immintrin.h>
#include <math.h>

#include "kernels/x86/avx512/attention_avx512_util.h"

namespace trellis::kernels_detail {
namespace {

constexpr int64_t kMaxVectors = kAttendAvx512MaxHeadDim / 16;

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

// The query heads a call takes at once (more are taken in turns): their running maxima stay in
// registers.
constexpr int64_t kMaxGroup = 16;

// kVec > 0: head_dim == 16 kVec, known at compile time, so that the accumulators stay in
// registers; kVec == 0: any head_dim (a multiple of 8), the vectors indexed at run time.
//
// n_q (<= kMaxGroup) query heads that read the same kv head, in the loop order "run of positions,
// then head": each run of keys or values is widened from f16 once and then read by every head from
// L1. Each head's arithmetic is exactly that of a call for that head alone.
template <int kVec>
void attend_heads(const KvStorage& kv, int64_t layer, int64_t kv_head, const AttentionRow& row,
                  const float* q, int64_t n_q, float* out, float* scratch, const float* sinks) {
  const KvLayout& layout = kv.layout();
  const int64_t head_dim = layout.head_dim;
  const int64_t n_vec = kVec > 0 ? kVec : (head_dim + 15) / 16;
  const __mmask16 tail = kVec > 0 || head_dim % 16 == 0 ? 0xffff : static_cast<__mmask16>(0xff);
  const int64_t first = row.first_position;
  const int64_t n_pos = static_cast<int64_t>(row.position) + 1;
  const int64_t n_scores = n_pos - first;
  const float scale = 1.0f / sqrtf(static_cast<float>(head_dim));
  float* widened = scratch + n_q * n_scores;
  // Row sizes taken here: an out-of-line call inside the loops would spill their registers.
  // (kv_row_bytes, not KvLayout's inline members: see avx512_util.h on inline functions.)
  const size_t key_row_bytes = kv_row_bytes(layout.types.key, head_dim);
  const size_t value_row_bytes = kv_row_bytes(layout.types.value, head_dim);
  auto view = [&](const uint8_t* run, int64_t n, KvType type, size_t row_bytes) {
    if (widens(type, n_q)) return widen_run(run, n, head_dim, type, row_bytes, widened);
    const bool f16 = type == KvType::F16;
    return RunView{run, row_bytes, f16 ? size_t{2} : size_t{4}, f16};
  };

  constexpr int64_t kSlots = kVec > 0 ? kVec : kMaxVectors;
  auto lanes_of = [&](int64_t i) { return i + 1 < n_vec ? static_cast<__mmask16>(0xffff) : tail; };

  // Scores: head h's scores[i] (at scratch + h n_scores) holds position first + i.
  __m512 max16[kMaxGroup];
  // Each head's max starts from its sink (-infinity without one).
  auto sink_of = [&](int64_t h) { return sinks != nullptr ? sinks[h] : -INFINITY; };
  for (int64_t h = 0; h < n_q; ++h) max16[h] = _mm512_set1_ps(sink_of(h));
  const RowRuns key_runs{kv, row, layer, kv_head, key_row_bytes};
  key_runs.for_each(true, [&](int64_t begin, int64_t end, const uint8_t* run) {
    const RunView keys = view(run, end - begin, layout.types.key, key_row_bytes);
    for (int64_t h = 0; h < n_q; ++h) {
      __m512 qv[kSlots];
      for (int64_t i = 0; i < n_vec; ++i)
        qv[i] = _mm512_maskz_loadu_ps(lanes_of(i), q + h * head_dim + 16 * i);
      float* scores = scratch + h * n_scores;
      // Sixteen positions at a time (zeros past the run's end), so that their lane sums share
      // one reduction (sum16); a position's score depends only on its own key either way.
      for (int64_t j = begin; j < end; j += 16) {
        auto dot = [&](int64_t e) {
          const uint8_t* k = keys.data + static_cast<size_t>(j + e - begin) * keys.row_bytes;
          __m512 even = _mm512_setzero_ps(), odd = _mm512_setzero_ps();
          for (int64_t i = 0; i < n_vec; i += 2) {
            even =
                _mm512_fmadd_ps(qv[i], load16(k + 16 * i * keys.elem, keys.f16, lanes_of(i)), even);
            if (i + 1 < n_vec) {
              odd = _mm512_fmadd_ps(
                  qv[i + 1], load16(k + 16 * (i + 1) * keys.elem, keys.f16, lanes_of(i + 1)), odd);
            }
          }
          return _mm512_add_ps(even, odd);
        };
        __m512 dots[16];
        if (end - j >= 16) {  // no test per position: the dots stay in registers
          for (int e = 0; e < 16; ++e) dots[e] = dot(e);
        } else {
          for (int e = 0; e < 16; ++e) dots[e] = j + e < end ? dot(e) : _mm512_setzero_ps();
        }
        const __mmask16 lanes = first_lanes(end - j);
        const __m512 score = _mm512_mul_ps(sum16(dots), _mm512_set1_ps(scale));
        _mm512_mask_storeu_ps(scores + (j - first), lanes, score);
        max16[h] = _mm512_mask_max_ps(max16[h], lanes, max16[h], score);
      }
    }
  });

  // Softmax weights (the sink joins the denominator only; a piece has none and gives its lse).
  for (int64_t h = 0; h < n_q; ++h) {
    softmax_in_place(scratch + h * n_scores, n_scores, _mm512_reduce_max_ps(max16[h]), sink_of(h),
                     row.lse != nullptr ? row.lse + h : nullptr);
  }

  // Outputs, accumulated between runs in memory (a float stored and loaded back is unchanged):
  // with a group, in the scratch, which stays in L1 where `out` (written once per row) does not.
  float* sums = widens(layout.types.value, n_q) ? widened + layout.block_size * head_dim : out;
  for (int64_t h = 0; h < n_q; ++h) {
    for (int64_t i = 0; i < n_vec; ++i)
      _mm512_mask_storeu_ps(sums + h * head_dim + 16 * i, lanes_of(i), _mm512_setzero_ps());
  }
  const RowRuns value_runs{kv, row, layer, kv_head, value_row_bytes};
  value_runs.for_each(false, [&](int64_t begin, int64_t end, const uint8_t* run) {
    const RunView values = view(run, end - begin, layout.types.value, value_row_bytes);
    for (int64_t h = 0; h < n_q; ++h) {
      const float* scores = scratch + h * n_scores;
      float* o = sums + h * head_dim;
      __m512 a[kSlots];
      for (int64_t i = 0; i < n_vec; ++i) a[i] = _mm512_maskz_loadu_ps(lanes_of(i), o + 16 * i);
      for (int64_t j = begin; j < end; ++j) {
        const __m512 p = _mm512_set1_ps(scores[j - first]);
        const uint8_t* v = values.data + static_cast<size_t>(j - begin) * values.row_bytes;
#pragma GCC unroll 16
        for (int64_t i = 0; i < n_vec; ++i)
          a[i] =
              _mm512_fmadd_ps(p, load16(v + 16 * i * values.elem, values.f16, lanes_of(i)), a[i]);
      }
      for (int64_t i = 0; i < n_vec; ++i) _mm512_mask_storeu_ps(o + 16 * i, lanes_of(i), a[i]);
    }
  });
  if (sums != out) {
    for (int64_t i = 0; i < n_q * head_dim; i += 16) {
      const __mmask16 lanes = first_lanes(n_q * head_dim - i);
      _mm512_mask_storeu_ps(out + i, lanes, _mm512_maskz_loadu_ps(lanes, sums + i));
    }
  }
}

void attend_heads_any(const KvStorage& kv, int64_t layer, int64_t kv_head, const AttentionRow& row,
                      const float* q, int64_t n_q, float* out, float* scratch, const float* sinks) {
  switch (kv.layout().head_dim) {
    case 64:
      return attend_heads<4>(kv, layer, kv_head, row, q, n_q, out, scratch, sinks);
    case 128:
      return attend_heads<8>(kv, layer, kv_head, row, q, n_q, out, scratch, sinks);
    default:
      return attend_heads<0>(kv, layer, kv_head, row, q, n_q, out, scratch, sinks);
  }
}

}  // namespace

void attend_head_avx512(const KvStorage& kv, int64_t layer, int64_t kv_head,
                        const AttentionRow& row, const float* q, float* out, float* scores,
                        float sink) {
  // -infinity stands for "no sink" in the group kernel's terms too: exp(-inf - max) = 0.
  attend_heads_any(kv, layer, kv_head, row, q, 1, out, scores, &sink);
}

void attend_group_avx512(const KvStorage& kv, int64_t layer, int64_t kv_head,
                         const AttentionRow& row, const float* q, int64_t n_q, float* out,
                         float* scratch, const float* sinks) {
  const int64_t head_dim = kv.layout().head_dim;
  for (int64_t h = 0; h < n_q; h += kMaxGroup) {
    const int64_t n = n_q - h < kMaxGroup ? n_q - h : kMaxGroup;
    AttentionRow heads = row;
    if (row.lse != nullptr) heads.lse = row.lse + h;
    attend_heads_any(kv, layer, kv_head, heads, q + h * head_dim, n, out + h * head_dim, scratch,
                     sinks != nullptr ? sinks + h : nullptr);
  }
}

}  // namespace trellis::kernels_detail
