#include "tensor/dtype.h"

#include <array>
#include <cassert>
#include <cctype>

#include "base/ascii.h"

namespace trellis {
namespace {

// Block sizes follow the GGUF definitions of each format.
constexpr std::array kDTypes = {
    DTypeInfo{DType::F32, "f32", 1, 4},       DTypeInfo{DType::F16, "f16", 1, 2},
    DTypeInfo{DType::Q4_0, "q4_0", 32, 18},   DTypeInfo{DType::Q4_1, "q4_1", 32, 20},
    DTypeInfo{DType::Q5_0, "q5_0", 32, 22},   DTypeInfo{DType::Q5_1, "q5_1", 32, 24},
    DTypeInfo{DType::Q8_0, "q8_0", 32, 34},   DTypeInfo{DType::Q8_1, "q8_1", 32, 36},
    DTypeInfo{DType::Q2_K, "q2_K", 256, 84},  DTypeInfo{DType::Q3_K, "q3_K", 256, 110},
    DTypeInfo{DType::Q4_K, "q4_K", 256, 144}, DTypeInfo{DType::Q5_K, "q5_K", 256, 176},
    DTypeInfo{DType::Q6_K, "q6_K", 256, 210}, DTypeInfo{DType::Q8_K, "q8_K", 256, 292},
    DTypeInfo{DType::I8, "i8", 1, 1},         DTypeInfo{DType::I16, "i16", 1, 2},
    DTypeInfo{DType::I32, "i32", 1, 4},       DTypeInfo{DType::I64, "i64", 1, 8},
    DTypeInfo{DType::F64, "f64", 1, 8},       DTypeInfo{DType::BF16, "bf16", 1, 2},
};

}  // namespace

std::optional<DTypeInfo> dtype_info(uint32_t raw_type) {
  for (const DTypeInfo& info : kDTypes) {
    if (static_cast<uint32_t>(info.type) == raw_type) return info;
  }
  return std::nullopt;
}

DTypeInfo dtype_info(DType type) {
  auto info = dtype_info(static_cast<uint32_t>(type));
  assert(info.has_value());
  return *info;
}

std::string_view dtype_name(DType type) {
  return dtype_info(type).name;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (iequals_ascii(info.name, name)) return info.type;
  }
  return std::nullopt;
}

std::optional<uint64_t> row_bytes(DType type, int64_t n_elems) {
  DTypeInfo info = dtype_info(type);
  if (n_elems < 0 || n_elems % info.block_elems != 0) return std::nullopt;
  return static_cast<uint64_t>(n_elems / info.block_elems) *
         static_cast<uint64_t>(info.block_bytes);
}

}  // namespace trellis
