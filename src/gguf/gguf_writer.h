// Writes GGUF v3 files. Metadata and tensor infos are declared first; tensor data is then streamed
// in declaration order, so a multi-gigabyte model never has to be held in memory.
//
//   GgufWriter w;
//   w.set("general.architecture", GgufValue{std::string("llama")});
//   w.add_tensor("token_embd.weight", DType::Q4_0, {2048, 32000});
//   TRELLIS_TRY(w.begin("out.gguf"));
//   TRELLIS_TRY(w.write_tensor_data(bytes));   // any number of chunks per tensor, in order
//   TRELLIS_TRY(w.finish());
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_value.h"
#include "tensor/dtype.h"

namespace trellis {

class GgufWriter {
 public:
  GgufWriter() = default;
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;
  ~GgufWriter();  // closes (and leaves incomplete) a file that was not finished

  // Sets or replaces a metadata key; keys keep the order of their first set().
  void set(const std::string& key, GgufValue value);
  // Copies every metadata key of `source` whose name starts with `prefix`.
  void copy_metadata(const GgufFile& source, std::string_view prefix);
  // Sets general.alignment (a power of two); the default is 32.
  void set_alignment(uint32_t alignment);

  // Declares a tensor; shape is in GGUF order (shape[0] is the row length). Returns its byte size,
  // or an Error when the shape does not fit the type's block size.
  Result<uint64_t> add_tensor(const std::string& name, DType type, std::vector<int64_t> shape);

  // Creates `path` and writes header, metadata and tensor infos.
  Status begin(const std::string& path);
  // Appends data of the current tensor; a chunk may not cross into the next tensor.
  Status write_tensor_data(std::span<const uint8_t> bytes);
  // Checks that every tensor got all its bytes, then flushes and closes the file.
  Status finish();

 private:
  struct TensorEntry {
    std::string name;
    DType type;
    std::vector<int64_t> shape;
    uint64_t offset;  // in the data section
    uint64_t n_bytes;
  };

  Status write_bytes(const void* data, size_t size);
  Status write_string(const std::string& s);
  Status write_value(const GgufValue& value);
  Status write_padding(uint64_t position);
  Error error(const std::string& what) const;

  std::vector<GgufKv> kvs_;
  std::vector<TensorEntry> tensors_;
  uint64_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_size_ = 0;  // bytes of the data section so far, padding included

  std::string path_;
  std::FILE* out_ = nullptr;
  size_t current_tensor_ = 0;
  uint64_t current_written_ = 0;  // bytes of the current tensor written so far
};

}  // namespace trellis
