// AVX-512 attention over a tile of queries: the query heads of consecutive rows of one sequence
// that read one kv head (a prefill chunk's rows, a draft's). Each query gets the bits that
// attend_head_avx512 gives it alone; the tile reads each key and value once for all of them, and
// forms the scores as a small matrix product instead of dot products summed across lanes.
//
// Scores. The per-row kernel forms a position's score from 16 lane sums s_l (l = 0..15): s_l =
// even_l + odd_l, where even_l chains the products of elements 16 i + l of the query and the key
// over i = 0, 2, 4, ... (one fused multiply-add each, from zero) and odd_l over i = 1, 3, ...;
// sum16 then adds the lanes in a fixed tree, ((C0 + C2) + (C1 + C3)) with C_c = (s_4c + s_4c+2)
// + (s_4c+1 + s_4c+3), and the result is multiplied by the scale. Here the keys of 16 positions
// are transposed (element d of the 16 keys in one vector), so s_l for 16 positions is a vector
// chain of broadcast query elements times key columns, and the same tree adds those vectors: the
// same operations on the same operands, with positions in the lanes instead of elements.
//
// Weights: each query's scores go through the per-row kernel's softmax_in_place. Outputs: each
// query's sum of weight times value, one position after another from zero, as there; the tile
// only keeps the outputs of several queries in registers while a value row is loaded once.
#include <immintrin.h>
#include <math.h>

#include "kernels/x86/avx512/attention_avx512.h"
#include "kernels/x86/avx512/attention_avx512_util.h"
#include "kernels/x86/avx512/avx512_util.h"

namespace trellis::kernels_detail {
namespace {

constexpr int64_t kChunk = 16;      // positions per step: one vector of scores
constexpr int kScoreQueries = 4;    // queries whose scores are formed together
constexpr int kValueQueries = 6;    // queries whose outputs are accumulated together
constexpr int kValueVectors = 4;    // vectors of 16 output elements accumulated at a time
constexpr int64_t kScoreRoom = 16;  // floats before and after each query's scores
constexpr int64_t kScoreStride = kAttentionSplitPositions + 2 * kScoreRoom;

// The 16 x 16 floats at `rows` (rows `stride` floats apart) transposed into `cols` (column e of
// the block at cols + 16 e).
inline void transpose16(const float* rows, int64_t stride, float* cols) {
  __m512 r[16];
  for (int e = 0; e < 16; ++e) r[e] = _mm512_loadu_ps(rows + e * stride);
  avx512::transpose16x16(r, cols);
}

// The keys (or values) of positions [c, c + 16) of one kv head as f32 rows, head_dim floats
// apart, in `buffer`; positions outside [lo, hi], which the block table may not hold, as zeros.
inline void widen_chunk(const KvStorage& kv, int64_t layer, int64_t kv_head, const int32_t* table,
                        bool keys, int64_t c, int64_t lo, int64_t hi, float* buffer) {
  const KvLayout& layout = kv.layout();
  const int64_t head_dim = layout.head_dim;
  const int64_t block_size = layout.block_size;
  const KvType type = keys ? layout.types.key : layout.types.value;
  const size_t row_bytes = kv_row_bytes(type, head_dim);
  const int64_t begin = c > lo ? c : lo;
  const int64_t end = c + kChunk <= hi ? c + kChunk : hi + 1;
  for (int64_t i = 0; i < (begin - c) * head_dim; i += 16)
    _mm512_storeu_ps(buffer + i, _mm512_setzero_ps());
  for (int64_t j = begin; j < end;) {
    const int32_t block = table[j / block_size];
    const int64_t slot = j % block_size;
    const int64_t n = end - j < block_size - slot ? end - j : block_size - slot;
    const uint8_t* base = keys ? kv.keys(block, layer, kv_head) : kv.values(block, layer, kv_head);
    widen_run(base + static_cast<size_t>(slot) * row_bytes, n, head_dim, type, row_bytes,
              buffer + (j - c) * head_dim);
    j += n;
  }
  for (int64_t i = (end - c) * head_dim; i < kChunk * head_dim; i += 16)
    _mm512_storeu_ps(buffer + i, _mm512_setzero_ps());
}

// Asks for the keys (or values) of positions [c, c + 16) ∩ [lo, hi] to be brought into the cache
// while the chunk before them is computed: a long context's rows come from memory.
inline void prefetch_chunk(const KvStorage& kv, int64_t layer, int64_t kv_head,
                           const int32_t* table, bool keys, int64_t c, int64_t lo, int64_t hi) {
  const KvLayout& layout = kv.layout();
  const size_t row_bytes =
      kv_row_bytes(keys ? layout.types.key : layout.types.value, layout.head_dim);
  const int64_t begin = c > lo ? c : lo;
  const int64_t end = c + kChunk <= hi ? c + kChunk : hi + 1;
  for (int64_t j = begin; j < end;) {
    const int32_t block = table[j / layout.block_size];
    const int64_t slot = j % layout.block_size;
    const int64_t n = end - j < layout.block_size - slot ? end - j : layout.block_size - slot;
    const uint8_t* base = keys ? kv.keys(block, layer, kv_head) : kv.values(block, layer, kv_head);
    const char* first = reinterpret_cast<const char*>(base + static_cast<size_t>(slot) * row_bytes);
    for (size_t b = 0; b < static_cast<size_t>(n) * row_bytes; b += 64)
      _mm_prefetch(first + b, _MM_HINT_T0);
    j += n;
  }
}

// s_l (see the top) of 16 positions for a block of kScoreQueries queries: kt holds the
// positions' key columns (element d of the 16 keys at kt + 16 d), qb the queries' elements
// interleaved (element d of query m at qb[kScoreQueries d + m]), so that every operand is at a
// fixed offset from two pointers.
template <int kVec>
__attribute__((always_inline)) inline void lane_sums(const float* kt, const float* qb, int l,
                                                     __m512* s) {
  __m512 even[kScoreQueries], odd[kScoreQueries];
  for (int m = 0; m < kScoreQueries; ++m) even[m] = odd[m] = _mm512_setzero_ps();
  for (int i = 0; i < kVec; ++i) {
    const int d = 16 * i + l;
    const __m512 k = _mm512_loadu_ps(kt + 16 * d);
    for (int m = 0; m < kScoreQueries; ++m) {
      __m512& chain = i % 2 == 0 ? even[m] : odd[m];
      chain = _mm512_fmadd_ps(_mm512_set1_ps(qb[kScoreQueries * d + m]), k, chain);
    }
  }
  for (int m = 0; m < kScoreQueries; ++m) s[m] = _mm512_add_ps(even[m], odd[m]);
}

// C_c = (s_4c + s_4c+2) + (s_4c+1 + s_4c+3) for a block of queries.
template <int kVec>
__attribute__((always_inline)) inline void quad_sums(const float* kt, const float* qb, int c,
                                                     __m512* out) {
  __m512 a[kScoreQueries], b[kScoreQueries], t[kScoreQueries];
  lane_sums<kVec>(kt, qb, 4 * c, a);
  lane_sums<kVec>(kt, qb, 4 * c + 2, b);
  for (int m = 0; m < kScoreQueries; ++m) a[m] = _mm512_add_ps(a[m], b[m]);
  lane_sums<kVec>(kt, qb, 4 * c + 1, b);
  lane_sums<kVec>(kt, qb, 4 * c + 3, t);
  for (int m = 0; m < kScoreQueries; ++m) out[m] = _mm512_add_ps(a[m], _mm512_add_ps(b[m], t[m]));
}

// The scores of 16 positions for a block of queries: ((C0 + C2) + (C1 + C3)) times the scale.
template <int kVec>
void chunk_scores(const float* kt, const float* qb, float scale, __m512* out) {
  __m512 x[kScoreQueries], y[kScoreQueries], z[kScoreQueries];
  quad_sums<kVec>(kt, qb, 0, x);
  quad_sums<kVec>(kt, qb, 2, y);
  for (int m = 0; m < kScoreQueries; ++m) x[m] = _mm512_add_ps(x[m], y[m]);
  quad_sums<kVec>(kt, qb, 1, y);
  quad_sums<kVec>(kt, qb, 3, z);
  for (int m = 0; m < kScoreQueries; ++m) {
    out[m] = _mm512_mul_ps(_mm512_add_ps(x[m], _mm512_add_ps(y[m], z[m])), _mm512_set1_ps(scale));
  }
}

// Bit e set when position c + e lies in [first, last].
inline uint32_t lanes_in(int64_t c, int64_t first, int64_t last) {
  const int64_t lo = first > c ? first - c : 0;
  const int64_t hi = last - c < kChunk - 1 ? last - c : kChunk - 1;
  if (hi < lo) return 0;
  return ((uint32_t{1} << (hi + 1)) - 1) & ~((uint32_t{1} << lo) - 1);
}

// For kNq queries and kValueVectors vectors of their outputs (sums[m], head_dim floats apart):
// adds weight times value for the 16 value rows at v (head_dim floats apart), position by
// position; p[m][e] is query m's weight of row e, taken only where bit e of active[m] is set.
template <int kNq>
inline void accumulate_values(const float* v, int64_t head_dim, const float* const* p,
                              const uint32_t* active, float* sums) {
  __m512 acc[kNq][kValueVectors];
  for (int m = 0; m < kNq; ++m) {
    for (int i = 0; i < kValueVectors; ++i)
      acc[m][i] = _mm512_loadu_ps(sums + m * head_dim + 16 * i);
  }
  bool full = true;
  for (int m = 0; m < kNq; ++m) full = full && active[m] == 0xffff;
  for (int e = 0; e < kChunk; ++e) {
    __m512 row[kValueVectors];
    for (int i = 0; i < kValueVectors; ++i) row[i] = _mm512_loadu_ps(v + e * head_dim + 16 * i);
    for (int m = 0; m < kNq; ++m) {
      if (!full && ((active[m] >> e) & 1) == 0) continue;
      const __m512 w = _mm512_set1_ps(p[m][e]);
      for (int i = 0; i < kValueVectors; ++i) acc[m][i] = _mm512_fmadd_ps(w, row[i], acc[m][i]);
    }
  }
  for (int m = 0; m < kNq; ++m) {
    for (int i = 0; i < kValueVectors; ++i)
      _mm512_storeu_ps(sums + m * head_dim + 16 * i, acc[m][i]);
  }
}

void accumulate_values_for(int n_q, const float* v, int64_t head_dim, const float* const* p,
                           const uint32_t* active, float* sums) {
  switch (n_q) {
    case 1:
      return accumulate_values<1>(v, head_dim, p, active, sums);
    case 2:
      return accumulate_values<2>(v, head_dim, p, active, sums);
    case 3:
      return accumulate_values<3>(v, head_dim, p, active, sums);
    case 4:
      return accumulate_values<4>(v, head_dim, p, active, sums);
    case 5:
      return accumulate_values<5>(v, head_dim, p, active, sums);
    default:
      return accumulate_values<kValueQueries>(v, head_dim, p, active, sums);
  }
}

template <int kVec>
void attend_tile(const KvStorage& kv, int64_t layer, int64_t kv_head, const int32_t* table,
                 const TileQuery* queries, int64_t n, float* scratch) {
  constexpr int64_t head_dim = 16 * kVec;
  const float scale = 1.0f / sqrtf(static_cast<float>(head_dim));
  float* sums = scratch;                  // n x head_dim
  float* chunk = sums + n * head_dim;     // 16 rows of keys or values
  float* kt = chunk + kChunk * head_dim;  // the same keys' columns
  // The queries in blocks of kScoreQueries, interleaved (see lane_sums); zeros past the last.
  float* packed = kt + kChunk * head_dim;
  const int64_t n_blocks = (n + kScoreQueries - 1) / kScoreQueries;
  for (int64_t m = 0; m < n_blocks * kScoreQueries; ++m) {
    float* block = packed + m / kScoreQueries * kScoreQueries * head_dim + m % kScoreQueries;
    for (int64_t d = 0; d < head_dim; ++d)
      block[kScoreQueries * d] = m < n ? queries[m].q[d] : 0.0f;
  }
  float* score_base = packed + n_blocks * kScoreQueries * head_dim;
  // Query m's scores: entry j - first for position j, with kScoreRoom floats on each side.
  auto scores_of = [&](int64_t m) { return score_base + m * kScoreStride + kScoreRoom; };
  int64_t lo = queries[0].first, hi = queries[0].last;
  for (int64_t m = 1; m < n; ++m) {
    lo = queries[m].first < lo ? queries[m].first : lo;
    hi = queries[m].last > hi ? queries[m].last : hi;
  }
  const int64_t c_begin = lo - lo % kChunk;

  for (int64_t c = c_begin; c <= hi; c += kChunk) {
    prefetch_chunk(kv, layer, kv_head, table, true, c + kChunk, lo, hi);
    widen_chunk(kv, layer, kv_head, table, true, c, lo, hi, chunk);
    for (int b = 0; b < kVec; ++b) transpose16(chunk + 16 * b, head_dim, kt + 256 * b);
    for (int64_t m0 = 0; m0 < n; m0 += kScoreQueries) {
      const int n_q = static_cast<int>(n - m0 < kScoreQueries ? n - m0 : kScoreQueries);
      uint32_t lanes[kScoreQueries];
      uint32_t any = 0;
      for (int m = 0; m < n_q; ++m) {
        lanes[m] = lanes_in(c, queries[m0 + m].first, queries[m0 + m].last);
        any |= lanes[m];
      }
      if (any == 0) continue;
      __m512 s[kScoreQueries];
      chunk_scores<kVec>(kt, packed + m0 * head_dim, scale, s);
      for (int m = 0; m < n_q; ++m) {
        if (lanes[m] == 0) continue;  // (then c - first may lie outside the query's room)
        _mm512_mask_storeu_ps(scores_of(m0 + m) + (c - queries[m0 + m].first),
                              static_cast<__mmask16>(lanes[m]), s[m]);
      }
    }
  }

  for (int64_t m = 0; m < n; ++m) {
    const TileQuery& query = queries[m];
    float* scores = scores_of(m);
    const int64_t n_scores = query.last - query.first + 1;
    softmax_in_place(scores, n_scores, max_score_of(scores, n_scores, query.sink), query.sink,
                     query.lse);
  }

  for (int64_t i = 0; i < n * head_dim; i += 16) _mm512_storeu_ps(sums + i, _mm512_setzero_ps());
  for (int64_t c = c_begin; c <= hi; c += kChunk) {
    prefetch_chunk(kv, layer, kv_head, table, false, c + kChunk, lo, hi);
    widen_chunk(kv, layer, kv_head, table, false, c, lo, hi, chunk);
    for (int64_t m0 = 0; m0 < n; m0 += kValueQueries) {
      const int n_q = static_cast<int>(n - m0 < kValueQueries ? n - m0 : kValueQueries);
      uint32_t active[kValueQueries];
      uint32_t any = 0;
      const float* p[kValueQueries];
      for (int m = 0; m < n_q; ++m) {
        const TileQuery& query = queries[m0 + m];
        active[m] = lanes_in(c, query.first, query.last);
        any |= active[m];
        p[m] = active[m] != 0 ? scores_of(m0 + m) + (c - query.first) : scores_of(m0 + m);
      }
      if (any == 0) continue;
      for (int i = 0; i < kVec; i += kValueVectors) {
        accumulate_values_for(n_q, chunk + 16 * i, head_dim, p, active,
                              sums + m0 * head_dim + 16 * i);
      }
    }
  }
  for (int64_t m = 0; m < n; ++m) {
    for (int i = 0; i < kVec; ++i)
      _mm512_storeu_ps(queries[m].out + 16 * i, _mm512_loadu_ps(sums + m * head_dim + 16 * i));
  }
}

}  // namespace

void attend_tile_avx512(const KvStorage& kv, int64_t layer, int64_t kv_head,
                        const int32_t* block_table, const TileQuery* queries, int64_t n_queries,
                        float* scratch) {
  switch (kv.layout().head_dim) {
    case 64:
      return attend_tile<4>(kv, layer, kv_head, block_table, queries, n_queries, scratch);
    case 128:
      return attend_tile<8>(kv, layer, kv_head, block_table, queries, n_queries, scratch);
    case 192:
      return attend_tile<12>(kv, layer, kv_head, block_table, queries, n_queries, scratch);
    default:
      return attend_tile<16>(kv, layer, kv_head, block_table, queries, n_queries, scratch);
  }
}

}  // namespace trellis::kernels_detail
