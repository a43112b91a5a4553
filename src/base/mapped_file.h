// A read-only memory mapping of a whole file, released on destruction (move-only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "base/result.h"

namespace trellis {

class MappedFile {
 public:
  // Maps `path` read-only. An empty file maps to an empty span.
  static Result<MappedFile> open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  // Drops the whole pages inside `range` (a part of bytes()) from this process's resident memory:
  // for data the process has copied elsewhere. They stay readable (touching them reads the file
  // again), so this is only a hint about memory, never about contents.
  void release(std::span<const uint8_t> range) const;
  const std::string& path() const { return path_; }

 private:
  void unmap();

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace trellis
