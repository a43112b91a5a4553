// Element types of GGUF tensors: ids as GGUF numbers them, and their block geometry.
#pragma once

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
};

// Geometry of one type: `block_elems` values are stored in `block_bytes` bytes.
struct DTypeInfo {
  DType type;
  std::string_view name;  // as llama.cpp prints it, e.g. "q4_0"
  int64_t block_elems;
  int64_t block_bytes;
};

// Info for a raw GGUF type id, or nullopt if the id is unknown to us.
std::optional<DTypeInfo> dtype_info(uint32_t raw_type);
DTypeInfo dtype_info(DType type);
std::string_view dtype_name(DType type);
// Parses a name such as "q4_0" or "F16" (case-insensitive).
std::optional<DType> dtype_from_name(std::string_view name);

// Bytes of a row of `n_elems` values; nullopt when n_elems is not a multiple of the block size.
std::optional<uint64_t> row_bytes(DType type, int64_t n_elems);

}  // namespace trellis
