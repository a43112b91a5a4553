// Element types of GGUF tensors: ids as GGUF numbers them, and their block geometry.
//
// Every module that knows something per type keeps it in one table of its own, indexed by the
// type (table_by_type below), so adding a type is one row per table and no switch to hunt down:
//   tensor/   kDTypeTable              name and block geometry (this file)
//   quant/    quant_table.cpp          scalar quantize / dequantize, stated round-trip bound
//   kernels/  generic/matmul_generic   activation format and scalar matmul (the reference)
//             x86/, arm/               a variant's own matmul kernels (none: the scalar one)
// Upper modules' rows hold function pointers of their own module, so they cannot join the row
// here without this module depending upward; each table instead checks its rows against the
// ones below it with static_asserts where it can, and tests check the rest
// (tests/unit/kernels/dtype_tables_test.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace trellis {

// Values are the GGUF/ggml type ids and must not change.
enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
  MXFP4 = 39,
};

// One past the largest id above: the size of every per-type table.
inline constexpr size_t kDTypeIdEnd = 40;

constexpr size_t dtype_index(DType type) {
  return static_cast<size_t>(type);
}

namespace dtype_detail {
// Not constexpr: reaching it while building a table at compile time stops the compilation.
inline void type_out_of_range_or_listed_twice() {}
}  // namespace dtype_detail

// A per-type table: each of `rows` (a struct with a `type` field) at dtype_index(row.type), Row{}
// in the slots of the types not listed. Evaluated at compile time, a type listed twice, or one
// whose id is not below kDTypeIdEnd, is a compile error.
template <class Row, size_t N>
constexpr std::array<Row, kDTypeIdEnd> table_by_type(const Row (&rows)[N]) {
  std::array<Row, kDTypeIdEnd> table{};
  std::array<bool, kDTypeIdEnd> listed{};
  for (const Row& row : rows) {
    const size_t i = dtype_index(row.type);
    if (i >= kDTypeIdEnd || listed[i]) dtype_detail::type_out_of_range_or_listed_twice();
    listed[i] = true;
    table[i] = row;
  }
  return table;
}

// Geometry of one type: `block_elems` values are stored in `block_bytes` bytes.
// block_elems == 0 marks an id unknown to us.
struct DTypeInfo {
  DType type = DType::F32;
  std::string_view name;  // as llama.cpp prints it, e.g. "q4_0"
  int64_t block_elems = 0;
  int64_t block_bytes = 0;
};

// Block sizes follow the GGUF definitions of each format.
inline constexpr std::array<DTypeInfo, kDTypeIdEnd> kDTypeTable = table_by_type<DTypeInfo>({
    {DType::F32, "f32", 1, 4},       {DType::F16, "f16", 1, 2},
    {DType::Q4_0, "q4_0", 32, 18},   {DType::Q4_1, "q4_1", 32, 20},
    {DType::Q5_0, "q5_0", 32, 22},   {DType::Q5_1, "q5_1", 32, 24},
    {DType::Q8_0, "q8_0", 32, 34},   {DType::Q8_1, "q8_1", 32, 36},
    {DType::Q2_K, "q2_K", 256, 84},  {DType::Q3_K, "q3_K", 256, 110},
    {DType::Q4_K, "q4_K", 256, 144}, {DType::Q5_K, "q5_K", 256, 176},
    {DType::Q6_K, "q6_K", 256, 210}, {DType::Q8_K, "q8_K", 256, 292},
    {DType::I8, "i8", 1, 1},         {DType::I16, "i16", 1, 2},
    {DType::I32, "i32", 1, 4},       {DType::I64, "i64", 1, 8},
    {DType::F64, "f64", 1, 8},       {DType::BF16, "bf16", 1, 2},
    {DType::MXFP4, "mxfp4", 32, 17},
});

// Info for a raw GGUF type id, or nullopt if the id is unknown to us.
constexpr std::optional<DTypeInfo> dtype_info(uint32_t raw_type) {
  if (raw_type >= kDTypeIdEnd || kDTypeTable[raw_type].block_elems == 0) return std::nullopt;
  return kDTypeTable[raw_type];
}
// Precondition: `type` has a row (every enumerator has one).
constexpr const DTypeInfo& dtype_info(DType type) {
  return kDTypeTable[dtype_index(type)];
}
std::string_view dtype_name(DType type);
// Parses a name such as "q4_0" or "F16" (case-insensitive).
std::optional<DType> dtype_from_name(std::string_view name);

// F32, F16 or BF16: one value per element, no blocks (what quantizers take and matmul packs as
// columns).
constexpr bool is_float_dtype(DType type) {
  return type == DType::F32 || type == DType::F16 || type == DType::BF16;
}

// Bytes of a row of `n_elems` values; nullopt when n_elems is not a multiple of the block size.
std::optional<uint64_t> row_bytes(DType type, int64_t n_elems);

}  // namespace trellis
