// A GGUF file opened through mmap and fully validated on open: header, metadata, tensor infos.
//
//   file: | magic "GGUF" | version u32 | n_tensors u64 | n_kv u64 | kv pairs | tensor infos |
//         | padding to alignment | tensor data (each tensor at an aligned offset)        |
//
// v2 and v3 share this layout (v1 used 32-bit counts and is rejected). After open() succeeds every
// tensor's data lies inside the file, tensors do not overlap, and element counts do not overflow.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/mapped_file.h"
#include "base/result.h"
#include "gguf/gguf_value.h"
#include "tensor/dtype.h"

namespace trellis {

inline constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian u32
inline constexpr uint64_t kGgufDefaultAlignment = 32;

struct GgufKv {
  std::string key;
  GgufValue value;
};

struct GgufTensor {
  std::string name;
  DType type;
  std::vector<int64_t> shape;  // GGUF order: shape[0] (ne0) is the row length
  uint64_t offset;             // relative to the start of the data section
  int64_t n_elements;
  uint64_t n_bytes;
  const uint8_t* data;  // points into the mapping; valid while the GgufFile lives

  int64_t n_rows() const { return shape.empty() ? 1 : n_elements / shape[0]; }
  std::span<const uint8_t> bytes() const { return {data, n_bytes}; }
};

class GgufFile {
 public:
  // Maps and parses `path`; every error message starts with the path.
  static Result<GgufFile> open(const std::string& path);
  // Parses bytes the caller keeps alive for the GgufFile's lifetime; `name` prefixes errors.
  static Result<GgufFile> parse(std::span<const uint8_t> bytes, const std::string& name);

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return bytes_.size(); }

  const std::vector<GgufKv>& metadata() const { return kvs_; }
  const GgufValue* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed lookups. Integer lookups accept any integer type whose value fits; float lookups
  // accept float32/float64. A missing key or a wrong type is an Error naming file and key.
  Result<int64_t> get_int(std::string_view key) const;
  Result<uint32_t> get_u32(std::string_view key) const;
  Result<double> get_float(std::string_view key) const;
  Result<bool> get_bool(std::string_view key) const;
  Result<std::string> get_string(std::string_view key) const;
  Result<const GgufArray*> get_array(std::string_view key) const;
  // The same with a default for a missing key (a present key of the wrong type is still an error).
  Result<int64_t> get_int_or(std::string_view key, int64_t fallback) const;
  Result<double> get_float_or(std::string_view key, double fallback) const;
  Result<bool> get_bool_or(std::string_view key, bool fallback) const;
  Result<std::string> get_string_or(std::string_view key, std::string fallback) const;

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(std::string_view name) const;

  // Drops the whole pages of `bytes` (inside the file) from resident memory when the file is
  // mapped (MappedFile::release); caller-owned bytes are left alone.
  void release_pages(std::span<const uint8_t> bytes) const;

 private:
  Error error(std::string_view what) const;

  std::string name_;
  std::shared_ptr<MappedFile> mapping_;  // null when parsing caller-owned bytes
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<GgufKv> kvs_;
  std::vector<GgufTensor> tensors_;

  friend class GgufParser;
};

}  // namespace trellis
