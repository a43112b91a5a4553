// The quant table: one row per type this module converts, and the two entry points that look a
// row up (once per row of values, never per block).
#include <cassert>
#include <cstdint>
#include <string>

#include "quant/block_types.h"
#include "quant/codecs.h"
#include "quant/quant.h"

namespace trellis {
namespace {

using namespace quant_detail;

// Bounds (see QuantTraits::round_trip_bound), with amax = max |x| over the block:
//   f16, bf16:  half an ulp, 2^-11 and 2^-8 of |x|.
//   _0 types:   half a step amax / qmax (a full step for q4_0 and q5_0, whose code of the extreme
//               opposite to the scale's sign is clamped one short), plus the f16 rounding of the
//               scale, qmax steps * 2^-11 = amax * 2^-11.
//   _1 types:   half a step (max - min) / qmax <= 2 amax / qmax, plus 2^-11 of the codes' range
//               and of the minimum m: 2 amax * 2^-11 + amax * 2^-11.
//   K types:    one step of the super-block's plain grid (see quantize_k.cpp): affine
//               (max - min(0, min)) / qmax <= 2 amax / qmax, symmetric amax / (qmax + 1).
constexpr double kF16Ulp = 0x1p-11;
constexpr QuantTraits kRows[] = {
    {DType::F32, sizeof(float), dequantize_f32, quantize_f32, 0.0},
    {DType::F16, sizeof(uint16_t), dequantize_f16, quantize_f16, kF16Ulp},
    {DType::BF16, sizeof(uint16_t), dequantize_bf16, quantize_bf16, 0x1p-8},
    {DType::Q4_0, sizeof(block_q4_0), dequantize_q4_0, quantize_q4_0, 1.0 / 8 + kF16Ulp},
    {DType::Q4_1, sizeof(block_q4_1), dequantize_q4_1, quantize_q4_1, 1.0 / 15 + 3 * kF16Ulp},
    {DType::Q5_0, sizeof(block_q5_0), dequantize_q5_0, quantize_q5_0, 1.0 / 16 + kF16Ulp},
    {DType::Q5_1, sizeof(block_q5_1), dequantize_q5_1, quantize_q5_1, 1.0 / 31 + 3 * kF16Ulp},
    {DType::Q8_0, sizeof(block_q8_0), dequantize_q8_0, quantize_q8_0, 0.5 / 127 + kF16Ulp},
    {DType::Q2_K, sizeof(block_q2_K), dequantize_q2_k, quantize_q2_k, 2.0 / 3},
    {DType::Q3_K, sizeof(block_q3_K), dequantize_q3_k, quantize_q3_k, 1.0 / 4},
    {DType::Q4_K, sizeof(block_q4_K), dequantize_q4_k, quantize_q4_k, 2.0 / 15},
    {DType::Q5_K, sizeof(block_q5_K), dequantize_q5_k, quantize_q5_k, 2.0 / 31},
    {DType::Q6_K, sizeof(block_q6_K), dequantize_q6_k, quantize_q6_k, 1.0 / 32},
    // mxfp4: amax is in [8, 16) doubled units and the top codes are 8 and 12, so a value near
    // amax may be off by 4 units (a quarter of amax), as may one between 8 and 12.
    {DType::MXFP4, sizeof(block_mxfp4), dequantize_mxfp4, quantize_mxfp4, 1.0 / 4},
};
constexpr auto kQuantTable = table_by_type(kRows);

// Every row agrees with the dtype table on the block size. (Whether a row names both codecs is
// checked by the tests: comparing a function's address with null is not a constant expression
// in every build, UndefinedBehaviorSanitizer's among them.)
constexpr bool rows_complete() {
  for (const QuantTraits& row : kRows) {
    const DTypeInfo& info = dtype_info(row.type);
    if (info.block_elems == 0 || row.block_struct_bytes != static_cast<size_t>(info.block_bytes))
      return false;
    if (row.round_trip_bound < 0.0) return false;
  }
  return true;
}
static_assert(rows_complete(),
              "a quant row's block struct's size is not the dtype table's block_bytes");

}  // namespace

const QuantTraits* quant_traits(DType type) {
  assert(dtype_index(type) < kDTypeIdEnd);
  const QuantTraits& row = kQuantTable[dtype_index(type)];
  return row.dequantize != nullptr ? &row : nullptr;
}

bool can_dequantize(DType type) {
  return quant_traits(type) != nullptr;
}

bool can_quantize(DType type) {
  return quant_traits(type) != nullptr;
}

std::string quant_type_names() {
  std::string names;
  for (const QuantTraits& row : kRows) {
    if (!names.empty()) names += ", ";
    names += dtype_name(row.type);
  }
  return names;
}

Status require_quant(DType type, std::string_view who) {
  if (can_quantize(type)) return {};
  return Error{std::string(who) + ": tensor type " + std::string(dtype_name(type)) +
               " cannot be quantized or dequantized (supported: " + quant_type_names() + ")"};
}

void dequantize_row(DType type, const void* src, float* dst, int64_t n_elems) {
  const QuantTraits* row = quant_traits(type);
  assert(row != nullptr && "dequantize_row: the type has no row in the quant table");
  assert(reinterpret_cast<uintptr_t>(src) % alignof(uint16_t) == 0);
  const int64_t block_elems = dtype_info(type).block_elems;
  assert(n_elems >= 0 && n_elems % block_elems == 0);
  row->dequantize(src, dst, n_elems / block_elems);
}

void quantize_row(DType type, const float* src, void* dst, int64_t n_elems) {
  const QuantTraits* row = quant_traits(type);
  assert(row != nullptr && "quantize_row: the type has no row in the quant table");
  assert(reinterpret_cast<uintptr_t>(dst) % alignof(uint16_t) == 0);
  const int64_t block_elems = dtype_info(type).block_elems;
  assert(n_elems >= 0 && n_elems % block_elems == 0);
  row->quantize(src, dst, n_elems / block_elems);
}

void quantize_row_weighted(DType type, const float* src, void* dst, int64_t n_elems,
                           const float* importance) {
  if (importance == nullptr) return quantize_row(type, src, dst, n_elems);
  const int64_t n_super = n_elems / kQkK;
  switch (type) {
    case DType::Q3_K:
      return quant_detail::quantize_q3_k_weighted(src, dst, n_super, importance);
    case DType::Q4_K:
      return quant_detail::quantize_q4_k_weighted(src, dst, n_super, importance);
    case DType::Q5_K:
      return quant_detail::quantize_q5_k_weighted(src, dst, n_super, importance);
    case DType::Q6_K:
      return quant_detail::quantize_q6_k_weighted(src, dst, n_super, importance);
    case DType::Q4_0:
      return quant_detail::quantize_q4_0_weighted(src, dst, n_elems, importance);
    case DType::Q4_1:
      return quant_detail::quantize_q4_1_weighted(src, dst, n_elems, importance);
    case DType::Q5_0:
      return quant_detail::quantize_q5_0_weighted(src, dst, n_elems, importance);
    case DType::Q5_1:
      return quant_detail::quantize_q5_1_weighted(src, dst, n_elems, importance);
    default:
      return quantize_row(type, src, dst, n_elems);
  }
}

}  // namespace trellis
