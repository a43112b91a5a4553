#include "tensor/dtype.h"

#include <cassert>

#include "base/ascii.h"

namespace trellis {

std::string_view dtype_name(DType type) {
  assert(dtype_info(type).block_elems != 0);
  return dtype_info(type).name;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const DTypeInfo& info : kDTypeTable) {
    if (info.block_elems != 0 && iequals_ascii(info.name, name)) return info.type;
  }
  return std::nullopt;
}

std::optional<uint64_t> row_bytes(DType type, int64_t n_elems) {
  const DTypeInfo& info = dtype_info(type);
  if (n_elems < 0 || n_elems % info.block_elems != 0) return std::nullopt;
  return static_cast<uint64_t>(n_elems / info.block_elems) *
         static_cast<uint64_t>(info.block_bytes);
}

}  // namespace trellis
