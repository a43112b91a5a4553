#include "kvdisk/block_record.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <string>

#include "base/checksum256.h"

namespace trellis {
namespace {

constexpr uint8_t kMagic[8] = {'T', 'R', 'K', 'V', 'B', 'L', 'K', 0};

void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

std::vector<uint8_t> encode_block_record(const BlockRecord& record,
                                         const RecordGeometry& geometry) {
  assert(!record.tokens.empty() && std::ssize(record.tokens) <= geometry.block_size);
  assert(record.kv.size() == geometry.kv_bytes);
  std::vector<uint8_t> out(geometry.file_bytes());
  uint8_t* p = out.data();
  std::memcpy(p, kMagic, 8);
  put_u32(p + 8, kDiskFormatVersion);
  put_u32(p + 12, static_cast<uint32_t>(geometry.block_size));
  put_u64(p + 16, geometry.kv_bytes);
  std::memcpy(p + 24, geometry.tier.data(), 32);
  std::memcpy(p + 56, record.key.data(), 32);
  std::memcpy(p + 88, record.parent.data(), 32);
  std::memcpy(p + 120, record.ns.data(), 32);
  put_u32(p + 152, static_cast<uint32_t>(record.tokens.size()));
  for (size_t i = 0; i < record.tokens.size(); ++i)
    put_u32(p + geometry.tokens_offset() + 4 * i, static_cast<uint32_t>(record.tokens[i]));
  std::memcpy(p + geometry.kv_offset(), record.kv.data(), record.kv.size());
  const size_t body = out.size() - RecordGeometry::kChecksumBytes;
  const auto sum = checksum256(std::span<const uint8_t>(out).first(body));
  std::memcpy(p + body, sum.data(), sum.size());
  return out;
}

Result<RecordHeader> decode_record_header(std::span<const uint8_t> header,
                                          const RecordGeometry& geometry) {
  if (header.size() < RecordGeometry::kHeaderBytes) return Error{"the record header is truncated"};
  const uint8_t* p = header.data();
  if (std::memcmp(p, kMagic, 8) != 0) return Error{"not a KV block record (bad magic)"};
  if (get_u32(p + 8) != kDiskFormatVersion)
    return Error{"format version " + std::to_string(get_u32(p + 8)) + ", expected " +
                 std::to_string(kDiskFormatVersion)};
  if (get_u32(p + 12) != static_cast<uint32_t>(geometry.block_size))
    return Error{"block size " + std::to_string(get_u32(p + 12)) + ", expected " +
                 std::to_string(geometry.block_size)};
  if (get_u64(p + 16) != geometry.kv_bytes)
    return Error{"payload of " + std::to_string(get_u64(p + 16)) + " bytes, expected " +
                 std::to_string(geometry.kv_bytes)};
  if (!std::equal(geometry.tier.begin(), geometry.tier.end(), p + 24))
    return Error{"the record belongs to another tier (model, KV type or layout)"};
  const uint32_t n_tokens = get_u32(p + 152);
  if (n_tokens < 1 || n_tokens > static_cast<uint32_t>(geometry.block_size))
    return Error{"the record holds " + std::to_string(n_tokens) + " tokens, expected 1 to " +
                 std::to_string(geometry.block_size)};
  RecordHeader h;
  h.n_tokens = static_cast<int32_t>(n_tokens);
  std::memcpy(h.key.data(), p + 56, 32);
  std::memcpy(h.parent.data(), p + 88, 32);
  std::memcpy(h.ns.data(), p + 120, 32);
  return h;
}

namespace {

// A verified record's fields, all but its K/V bytes.
BlockRecord record_without_kv(std::span<const uint8_t> head, const RecordHeader& header,
                              const RecordGeometry& geometry) {
  BlockRecord record;
  record.key = header.key;
  record.parent = header.parent;
  record.ns = header.ns;
  record.tokens.resize(static_cast<size_t>(header.n_tokens));
  for (size_t i = 0; i < record.tokens.size(); ++i)
    record.tokens[i] =
        static_cast<TokenId>(get_u32(head.data() + geometry.tokens_offset() + 4 * i));
  return record;
}

}  // namespace

Result<BlockRecord> decode_record_parts(std::span<const uint8_t> head, std::span<const uint8_t> kv,
                                        std::span<const uint8_t> sum,
                                        const RecordGeometry& geometry) {
  if (head.size() != geometry.kv_offset() || kv.size() != geometry.kv_bytes ||
      sum.size() != RecordGeometry::kChecksumBytes) {
    return Error{"record of " + std::to_string(head.size() + kv.size() + sum.size()) +
                 " bytes, expected " + std::to_string(geometry.file_bytes()) +
                 " (truncated or foreign)"};
  }
  Result<RecordHeader> header = decode_record_header(head, geometry);
  if (!header.ok()) return header.error();
  // The slots past the record's tokens are written as zeros: anything else is not a record this
  // format writes (and would not come back the same from encode_block_record).
  for (int32_t i = header->n_tokens; i < geometry.block_size; ++i) {
    if (get_u32(head.data() + geometry.tokens_offset() + 4 * static_cast<size_t>(i)) != 0) {
      return Error{"token slot " + std::to_string(i) + " past the record's " +
                   std::to_string(header->n_tokens) + " tokens is not zero (corrupt record)"};
    }
  }
  Checksum256Builder checksum;
  checksum.update(head);
  checksum.update(kv);
  const Checksum256 expected = checksum.finish();
  if (!std::equal(expected.begin(), expected.end(), sum.begin()))
    return Error{"checksum mismatch (torn or corrupt record)"};
  return record_without_kv(head, *header, geometry);
}

Result<BlockRecord> decode_block_record(std::span<const uint8_t> bytes,
                                        const RecordGeometry& geometry) {
  if (bytes.size() != geometry.file_bytes())
    return Error{"record of " + std::to_string(bytes.size()) + " bytes, expected " +
                 std::to_string(geometry.file_bytes()) + " (truncated or foreign)"};
  const std::span<const uint8_t> kv = bytes.subspan(geometry.kv_offset(), geometry.kv_bytes);
  Result<BlockRecord> record = decode_record_parts(
      bytes.first(geometry.kv_offset()), kv, bytes.last(RecordGeometry::kChecksumBytes), geometry);
  if (record.ok()) record->kv.assign(kv.begin(), kv.end());
  return record;
}

}  // namespace trellis
