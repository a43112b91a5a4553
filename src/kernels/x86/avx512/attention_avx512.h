// AVX-512 attention for one (query row, head) pair; see kernels/attention.h for the math.
#pragma once

#include "kernels/attention.h"

namespace trellis::kernels_detail {

// The query head is held in registers: 16 zmm at most.
constexpr int64_t kAttendAvx512MaxHeadDim = 256;

// Precondition: kv.layout().head_dim % 8 == 0, head_dim <= kAttendAvx512MaxHeadDim, and the CPU
// has AVX-512 F, BW and VL. `scores` holds at least row.position + 1 floats.
void attend_head_avx512(const KvStorage& kv, int64_t layer, int64_t kv_head,
                        const AttentionRow& row, const float* q, float* out, float* scores);

}  // namespace trellis::kernels_detail
