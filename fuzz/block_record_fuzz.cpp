// libFuzzer target: the disk tier's block record decoder. Any bytes are either rejected with an
// error or decode to a record that encodes back to exactly those bytes; nothing crashes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "kvdisk/block_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const trellis::RecordGeometry geometry{{}, 4, 64};
  const std::span<const uint8_t> bytes(data, size);
  (void)trellis::decode_record_header(bytes, geometry);
  trellis::Result<trellis::BlockRecord> record = trellis::decode_block_record(bytes, geometry);
  if (record.ok()) {
    const std::vector<uint8_t> again = trellis::encode_block_record(*record, geometry);
    if (again.size() != size || !std::equal(again.begin(), again.end(), data)) std::abort();
  }
  return 0;
}
