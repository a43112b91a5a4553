// Quantizers of the K types (256-element super-blocks), used by quantize_row. Internal to quant/.
#pragma once

#include <cstdint>

#include "quant/block_types.h"

namespace trellis::quant_detail {

// Each writes n_blocks super-blocks from src[0, 256 n_blocks). Precondition: finite inputs whose
// scales fit f16 (|x| well below 65504 times the largest code).
void quantize_q2_k(const float* src, block_q2_K* blocks, int64_t n_blocks);
void quantize_q3_k(const float* src, block_q3_K* blocks, int64_t n_blocks);
void quantize_q4_k(const float* src, block_q4_K* blocks, int64_t n_blocks);
void quantize_q5_k(const float* src, block_q5_K* blocks, int64_t n_blocks);
void quantize_q6_k(const float* src, block_q6_K* blocks, int64_t n_blocks);

}  // namespace trellis::quant_detail
