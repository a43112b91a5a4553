// AVX2/F16C attention for one (query row, head) pair; see kernels/attention.h for the math.
#pragma once

#include "kernels/attention.h"

namespace trellis::kernels_detail {

// The query head is held in registers: 32 ymm at most.
constexpr int64_t kAttendAvx2MaxHeadDim = 256;

// Precondition: kv.layout().head_dim % 8 == 0, head_dim <= kAttendAvx2MaxHeadDim, and the CPU has
// AVX2, FMA and F16C.
// `scores` holds at least row.position + 1 floats; `sink`: -infinity for none.
void attend_head_avx2(const KvStorage& kv, int64_t layer, int64_t kv_head, const AttentionRow& row,
                      const float* q, float* out, float* scores, float sink);

}  // namespace trellis::kernels_detail
