// The file format of one KV block on disk (all integers little-endian):
//
//   offset        bytes      field
//   0             8          magic "TRKVBLK\0"
//   8             4          format version (kDiskFormatVersion)
//   12            4          block size B in tokens
//   16            8          K/V payload bytes P
//   24            32         tier digest (binds the block to the model, KV type and layout)
//   56            32         block key (see block_key.h)
//   88            32         parent block key (zeros for the first block)
//   120           32         namespace digest
//   152           4          T, the tokens the block holds: B, or 1..B-1 for a partial block
//                            (the last block of a cached sequence that ends inside it)
//   156           4 B        the block's token ids (T of them, then zeros)
//   156 + 4B      P          K/V bytes, exactly as KvStorage holds the block (slots T.. unused)
//   156 + 4B + P  32         checksum256 (base/checksum256.h) of every byte before it
//
// The size of a record is fixed by (B, P), so a truncated file is recognised by its size alone;
// any flipped byte fails the trailing checksum. A record is written whole to a temporary file,
// made durable, and only then renamed into the index (see disk_tier.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/result.h"
#include "base/token_id.h"
#include "kvdisk/block_key.h"

namespace trellis {

// Version 1 closed records with SHA-256, which cost more than the read itself when a long prompt
// came back from disk, and had no partial blocks; its records are ignored (and recomputed).
inline constexpr uint32_t kDiskFormatVersion = 2;
using TierDigest = std::array<uint8_t, 32>;

// What every record of one tier shares.
struct RecordGeometry {
  TierDigest tier{};
  int32_t block_size = 0;  // tokens per block, > 0
  uint64_t kv_bytes = 0;   // K/V payload per block, > 0

  static constexpr size_t kHeaderBytes = 156;
  static constexpr size_t kChecksumBytes = 32;
  size_t tokens_offset() const { return kHeaderBytes; }
  size_t kv_offset() const { return kHeaderBytes + 4 * static_cast<size_t>(block_size); }
  size_t file_bytes() const { return kv_offset() + kv_bytes + kChecksumBytes; }
};

struct BlockRecord {
  BlockKey key{};
  BlockKey parent{};
  NamespaceDigest ns{};
  std::vector<TokenId> tokens;  // 1..block_size ids: fewer for a partial block
  std::vector<uint8_t> kv;      // kv_bytes bytes
};

// The identifying fields of a record, readable without its payload.
struct RecordHeader {
  BlockKey key{};
  BlockKey parent{};
  NamespaceDigest ns{};
  int32_t n_tokens = 0;
};

// Precondition: 1 <= record.tokens.size() <= block_size and record.kv.size() == kv_bytes.
std::vector<uint8_t> encode_block_record(const BlockRecord& record, const RecordGeometry& geometry);

// Checks the fixed header of a record (magic, version, block size, payload size, tier) against
// the geometry; `header` holds at least kHeaderBytes bytes. Does not verify the checksum.
Result<RecordHeader> decode_record_header(std::span<const uint8_t> header,
                                          const RecordGeometry& geometry);

// Checks a whole record: its size, header and checksum. Errors say which check failed.
Result<BlockRecord> decode_block_record(std::span<const uint8_t> bytes,
                                        const RecordGeometry& geometry);
// Checks a record read in three parts, where its K/V went straight to its destination: `head`
// (the kv_offset() bytes before the K/V), `kv` (kv_bytes) and `sum` (the trailing checksum).
// Returns the record's fields but its K/V (record.kv stays empty).
Result<BlockRecord> decode_record_parts(std::span<const uint8_t> head, std::span<const uint8_t> kv,
                                        std::span<const uint8_t> sum,
                                        const RecordGeometry& geometry);

}  // namespace trellis
