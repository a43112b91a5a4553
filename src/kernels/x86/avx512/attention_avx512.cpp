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

  // Softmax weights.
  for (int64_t h = 0; h < n_q; ++h) {
    float* scores = scratch + h * n_scores;
    const float max_score = _mm512_reduce_max_ps(max16[h]);
    __m512 total = _mm512_setzero_ps();
    for (int64_t i = 0; i < n_scores; i += 16) {
      const __mmask16 lanes = first_lanes(n_scores - i);
      const __m512 e =
          exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(lanes, scores + i), _mm512_set1_ps(max_score)));
      _mm512_mask_storeu_ps(scores + i, lanes, e);
      total = _mm512_add_ps(total, _mm512_maskz_mov_ps(lanes, e));
    }
    // The weights e_j / sum, sixteen at a time: the same products the output loop would form one
    // position at a time, taken out of it.
    // The sink joins the denominator only (exp(-infinity) = 0 without one).
    const float sum = _mm512_reduce_add_ps(total) + expf(sink_of(h) - max_score);
    if (row.lse != nullptr) row.lse[h] = max_score + logf(sum);  // a piece: no sink
    const __m512 inv = _mm512_set1_ps(1.0f / sum);
    for (int64_t i = 0; i < n_scores; i += 16) {
      const __mmask16 lanes = first_lanes(n_scores - i);
      _mm512_mask_storeu_ps(scores + i, lanes,
                            _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, scores + i), inv));
    }
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
