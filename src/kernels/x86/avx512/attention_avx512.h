// AVX-512 attention for one query row and one or several heads; see kernels/attention.h for the
// math.
#pragma once

#include "kernels/attention.h"
#include "kernels/matmul_internal.h"

namespace trellis::kernels_detail {

// The query head is held in registers: 16 zmm at most.
constexpr int64_t kAttendAvx512MaxHeadDim = 256;

// Precondition: kv.layout().head_dim % 8 == 0, head_dim <= kAttendAvx512MaxHeadDim, and the CPU
// has AVX-512 F, BW and VL. `scores` holds at least row.position + 1 floats; `sink`: -infinity
// for none.
void attend_head_avx512(const KvStorage& kv, int64_t layer, int64_t kv_head,
                        const AttentionRow& row, const float* q, float* out, float* scores,
                        float sink);

// The n_q query heads of one row that read kv head `kv_head` (an AttendGroupKernel): the same bits
// as attend_head_avx512 for each head alone. Same preconditions; `scratch` holds
// attend_group_scratch_floats(kv.layout(), n_q, row) floats; `sinks`: n_q logits, or null.
void attend_group_avx512(const KvStorage& kv, int64_t layer, int64_t kv_head,
                         const AttentionRow& row, const float* q, int64_t n_q, float* out,
                         float* scratch, const float* sinks);

// Queries of one kv head and block table at once (an AttendTileKernel): the same bits as
// attend_head_avx512 for each query alone. Precondition: head_dim a multiple of 64, at most
// kAttendAvx512MaxHeadDim; the CPU as above.
void attend_tile_avx512(const KvStorage& kv, int64_t layer, int64_t kv_head,
                        const int32_t* block_table, const TileQuery* queries, int64_t n_queries,
                        float* scratch);

}  // namespace trellis::kernels_detail
