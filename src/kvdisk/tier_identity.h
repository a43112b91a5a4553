// What a disk tier is bound to: KV bytes are only meaningful for the model file, KV element type,
// block layout and record format that produced them. Each identity gets its own directory under
// the cache dir (tier-<digest>), so a tier of another model or block size is never read, and is
// left alone rather than destroyed.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"
#include "kvdisk/block_record.h"

namespace trellis {

struct TierIdentity {
  std::string model_sha256;  // SHA-256 of the model file, hex
  std::string architecture;  // general.architecture
  std::string kv_type;       // kv_types_name(): "f16", "q8_0", "K q8_0, V f16", ...
  int32_t block_size = 0;    // tokens per block
  uint64_t block_bytes = 0;  // K/V bytes per block (layers x heads x B x (key + value row))

  // One "key=value" line per field, the format version included.
  std::string describe() const;
  // SHA-256 of describe().
  TierDigest digest() const;
  // "tier-" and the first 16 hex digits of digest(): the tier's directory name.
  std::string directory_name() const;
};

// The SHA-256 (hex) of `file`, computed once and remembered in `memo_path` against the file's
// absolute path, size and modification time: a later call with the file unchanged reads it back
// instead of hashing gigabytes again. A memo that cannot be read or written costs only the hash.
Result<std::string> remembered_file_sha256(const std::string& file, const std::string& memo_path);

}  // namespace trellis
