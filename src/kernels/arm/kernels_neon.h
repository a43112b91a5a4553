// The NEON kernels of arm/ files other than matmul_neon.cpp, gathered into neon_kernels() by
// matmul_neon.cpp.
#pragma once

#include <cstdint>

#include "kernels/matmul_internal.h"

namespace trellis::kernels_detail::neon {

// arm/matmul_qk_neon.cpp: the K super-block types against ActQ8_K activations.
void matmul_q2_k(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_q3_k(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_q4_k(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_q5_k(const MatmulArgs& a, int64_t row_begin, int64_t row_end);
void matmul_q6_k(const MatmulArgs& a, int64_t row_begin, int64_t row_end);

// arm/attention_neon.cpp: paged attention for one query head, head sizes a multiple of 4 up to
// kAttendNeonMaxHeadDim (kernels/attend_head_common.h's kAttendSimdMaxHeadDim).
constexpr int64_t kAttendNeonMaxHeadDim = 256;
void attend_head(const KvStorage& kv, int64_t layer, int64_t kv_head, const AttentionRow& row,
                 const float* q, float* out, float* scores, float sink);

}  // namespace trellis::kernels_detail::neon
