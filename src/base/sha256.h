// SHA-256 (FIPS 180-4), for identifying model files in benchmark records. Streaming: feed bytes
// with update() in any split, then finish() once.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "base/result.h"

namespace trellis {

class Sha256 {
 public:
  Sha256();
  void update(std::span<const uint8_t> bytes);
  void update(std::string_view text) {
    update(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  }
  // The digest; the object is spent afterwards (precondition: finish() not called before).
  std::array<uint8_t, 32> finish();
  // The digest as 64 lower-case hex digits.
  std::string finish_hex();

 private:
  void compress(const uint8_t* block);  // one 64-byte block

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

// The SHA-256 of a whole file, as hex; errors name the file.
Result<std::string> sha256_file(const std::string& path);

}  // namespace trellis
