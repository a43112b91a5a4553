// Feeds arbitrary bytes to the GGUF parser: it must reject or accept, never read out of bounds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "gguf/gguf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  trellis::Result<trellis::GgufFile> file = trellis::GgufFile::parse({data, size}, "fuzz.gguf");
  if (!file.ok()) return 0;
  // Touch everything an accepted file claims to hold.
  uint64_t sum = 0;
  for (const trellis::GgufKv& kv : file->metadata()) sum += kv.value.to_display_string().size();
  for (const trellis::GgufTensor& t : file->tensors()) {
    if (t.n_bytes > 0) sum += t.data[0] + t.data[t.n_bytes - 1];
    if (t.data < data || t.data + t.n_bytes > data + size) std::abort();
  }
  return sum == 1 ? 1 : 0;
}
