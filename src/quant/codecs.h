// The scalar codec of each type, as the quant table (quant_table.cpp) holds them. Internal to
// quant/: everyone else goes through quantize_row / dequantize_row (quant.h).
//
// Each converts n_blocks whole blocks of its type (a block of the float types is one value).
// The bytes at `src` / `dst` are a run of the type's blocks (block_types.h), 2-byte aligned.
#pragma once

#include <cstdint>

namespace trellis::quant_detail {

// dequantize.cpp: dst receives n_blocks * block_elems floats.
void dequantize_f32(const void* src, float* dst, int64_t n_blocks);
void dequantize_f16(const void* src, float* dst, int64_t n_blocks);
void dequantize_bf16(const void* src, float* dst, int64_t n_blocks);
void dequantize_q4_0(const void* src, float* dst, int64_t n_blocks);
void dequantize_q4_1(const void* src, float* dst, int64_t n_blocks);
void dequantize_q5_0(const void* src, float* dst, int64_t n_blocks);
void dequantize_q5_1(const void* src, float* dst, int64_t n_blocks);
void dequantize_q8_0(const void* src, float* dst, int64_t n_blocks);
void dequantize_q2_k(const void* src, float* dst, int64_t n_blocks);
void dequantize_q3_k(const void* src, float* dst, int64_t n_blocks);
void dequantize_q4_k(const void* src, float* dst, int64_t n_blocks);
void dequantize_q5_k(const void* src, float* dst, int64_t n_blocks);
void dequantize_q6_k(const void* src, float* dst, int64_t n_blocks);

// mxfp4.cpp: gpt-oss's expert format, and its scale (also read by the matmul kernels).
void dequantize_mxfp4(const void* src, float* dst, int64_t n_blocks);
void quantize_mxfp4(const float* src, void* dst, int64_t n_blocks);

// quantize.cpp (the float types and the 32-element types, with the reference's rounding).
void quantize_f32(const float* src, void* dst, int64_t n_blocks);
void quantize_f16(const float* src, void* dst, int64_t n_blocks);
void quantize_bf16(const float* src, void* dst, int64_t n_blocks);
void quantize_q4_0(const float* src, void* dst, int64_t n_blocks);
void quantize_q4_1(const float* src, void* dst, int64_t n_blocks);
void quantize_q5_0(const float* src, void* dst, int64_t n_blocks);
void quantize_q5_1(const float* src, void* dst, int64_t n_blocks);
void quantize_q8_0(const float* src, void* dst, int64_t n_blocks);

// quantize_k.cpp (the K types, by a search of the scales). Precondition: finite inputs whose
// scales fit f16 (|x| well below 65504 times the largest code).
void quantize_q2_k(const float* src, void* dst, int64_t n_blocks);
void quantize_q3_k(const float* src, void* dst, int64_t n_blocks);
void quantize_q4_k(const float* src, void* dst, int64_t n_blocks);
void quantize_q5_k(const float* src, void* dst, int64_t n_blocks);
void quantize_q6_k(const float* src, void* dst, int64_t n_blocks);
// The K types weighted by an importance matrix row (`importance`: one value per element), or by
// the format's default weights when it is null (what the functions above do); q4_0 takes
// a whole row of `n_elems` values and need `importance`, and so do q4_1, q5_0 and q5_1 (see
// quantize_k.cpp).
void quantize_q3_k_weighted(const float* src, void* dst, int64_t n_blocks, const float* importance);
void quantize_q4_k_weighted(const float* src, void* dst, int64_t n_blocks, const float* importance);
void quantize_q5_k_weighted(const float* src, void* dst, int64_t n_blocks, const float* importance);
void quantize_q6_k_weighted(const float* src, void* dst, int64_t n_blocks, const float* importance);
void quantize_q4_0_weighted(const float* src, void* dst, int64_t n_elems, const float* importance);
void quantize_q4_1_weighted(const float* src, void* dst, int64_t n_elems, const float* importance);
void quantize_q5_0_weighted(const float* src, void* dst, int64_t n_elems, const float* importance);
void quantize_q5_1_weighted(const float* src, void* dst, int64_t n_elems, const float* importance);

// Packs 32 codes: the low 4 bits of code l in the low nibble of qs[l], of code l + 16 in the
// high nibble.
void store_nibbles(const int* q, uint8_t* qs);
// Packs 32 five-bit codes: the low 4 bits as store_nibbles does, bit 4 of code l as bit l of the
// little-endian uint32 qh.
void store_five_bits(const int* q, uint8_t* qs, uint8_t* qh);

}  // namespace trellis::quant_detail
