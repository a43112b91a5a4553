#include "gguf/gguf_writer.h"

#include <cerrno>
#include <cstring>

namespace trellis {
namespace {
uint64_t align_up(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}
}  // namespace

GgufWriter::~GgufWriter() {
  if (out_ != nullptr) std::fclose(out_);
}

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (GgufKv& kv : kvs_) {
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  }
  kvs_.push_back(GgufKv{key, std::move(value)});
}

void GgufWriter::copy_metadata(const GgufFile& source, std::string_view prefix) {
  for (const GgufKv& kv : source.metadata()) {
    if (kv.key.starts_with(prefix)) set(kv.key, kv.value);
  }
}

void GgufWriter::set_alignment(uint32_t alignment) {
  alignment_ = alignment;
  set("general.alignment", GgufValue{alignment});
}

Result<uint64_t> GgufWriter::add_tensor(const std::string& name, DType type,
                                        std::vector<int64_t> shape) {
  int64_t n_elements = 1;
  for (int64_t dim : shape) n_elements *= dim;
  int64_t row_length = shape.empty() ? 1 : shape[0];
  std::optional<uint64_t> row_size = row_bytes(type, row_length);
  if (!row_size) {
    return Error{"tensor '" + name + "': row length " + std::to_string(row_length) +
                 " is not a multiple of the " + std::string(dtype_name(type)) + " block size"};
  }
  uint64_t n_bytes = *row_size * static_cast<uint64_t>(n_elements / row_length);
  uint64_t offset = align_up(data_size_, alignment_);
  tensors_.push_back(TensorEntry{name, type, std::move(shape), offset, n_bytes});
  data_size_ = offset + n_bytes;
  return n_bytes;
}

Error GgufWriter::error(const std::string& what) const {
  return Error{path_ + ": " + what};
}

Status GgufWriter::write_bytes(const void* data, size_t size) {
  if (size > 0 && std::fwrite(data, 1, size, out_) != size) {
    return error(std::string("write failed: ") + std::strerror(errno));
  }
  return {};
}

Status GgufWriter::write_string(const std::string& s) {
  uint64_t length = s.size();
  TRELLIS_TRY(write_bytes(&length, sizeof(length)));
  return write_bytes(s.data(), s.size());
}

Status GgufWriter::write_value(const GgufValue& value) {
  return std::visit(
      [this](const auto& v) -> Status {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return write_string(v);
        } else if constexpr (std::is_same_v<T, GgufArray>) {
          auto item_type = static_cast<uint32_t>(v.item_type);
          uint64_t count = v.items.size();
          TRELLIS_TRY(write_bytes(&item_type, sizeof(item_type)));
          TRELLIS_TRY(write_bytes(&count, sizeof(count)));
          for (const GgufValue& item : v.items) {
            if (item.type() != v.item_type) return error("array items of mixed types");
            TRELLIS_TRY(write_value(item));
          }
          return {};
        } else if constexpr (std::is_same_v<T, bool>) {
          uint8_t raw = v ? 1 : 0;
          return write_bytes(&raw, 1);
        } else {
          return write_bytes(&v, sizeof(v));
        }
      },
      value.storage);
}

Status GgufWriter::write_padding(uint64_t position) {
  static constexpr uint8_t kZeros[256] = {};
  uint64_t padding = align_up(position, alignment_) - position;
  while (padding > 0) {
    size_t chunk = padding < sizeof(kZeros) ? static_cast<size_t>(padding) : sizeof(kZeros);
    TRELLIS_TRY(write_bytes(kZeros, chunk));
    padding -= chunk;
  }
  return {};
}

Status GgufWriter::begin(const std::string& path) {
  path_ = path;
  out_ = std::fopen(path.c_str(), "wb");
  if (out_ == nullptr) return error(std::string("cannot create: ") + std::strerror(errno));

  uint32_t magic = kGgufMagic;
  uint32_t version = 3;
  uint64_t n_tensors = tensors_.size();
  uint64_t n_kv = kvs_.size();
  TRELLIS_TRY(write_bytes(&magic, sizeof(magic)));
  TRELLIS_TRY(write_bytes(&version, sizeof(version)));
  TRELLIS_TRY(write_bytes(&n_tensors, sizeof(n_tensors)));
  TRELLIS_TRY(write_bytes(&n_kv, sizeof(n_kv)));
  for (const GgufKv& kv : kvs_) {
    TRELLIS_TRY(write_string(kv.key));
    auto type = static_cast<uint32_t>(kv.value.type());
    TRELLIS_TRY(write_bytes(&type, sizeof(type)));
    TRELLIS_TRY(write_value(kv.value));
  }
  for (const TensorEntry& t : tensors_) {
    TRELLIS_TRY(write_string(t.name));
    auto n_dims = static_cast<uint32_t>(t.shape.size());
    TRELLIS_TRY(write_bytes(&n_dims, sizeof(n_dims)));
    for (int64_t dim : t.shape) {
      auto raw = static_cast<uint64_t>(dim);
      TRELLIS_TRY(write_bytes(&raw, sizeof(raw)));
    }
    auto type = static_cast<uint32_t>(t.type);
    TRELLIS_TRY(write_bytes(&type, sizeof(type)));
    TRELLIS_TRY(write_bytes(&t.offset, sizeof(t.offset)));
  }
  long header_end = std::ftell(out_);
  if (header_end < 0) return error("cannot tell the file position");
  // The data section starts aligned; files without tensors end right after the infos.
  if (!tensors_.empty()) TRELLIS_TRY(write_padding(static_cast<uint64_t>(header_end)));
  current_tensor_ = 0;
  current_written_ = 0;
  return {};
}

Status GgufWriter::write_tensor_data(std::span<const uint8_t> bytes) {
  if (out_ == nullptr) return error("write_tensor_data before begin");
  // Tensors of zero bytes need no data: move past them before taking bytes.
  while (!bytes.empty() && current_tensor_ < tensors_.size() &&
         tensors_[current_tensor_].n_bytes == 0) {
    TRELLIS_TRY(write_tensor_data({}));
  }
  if (current_tensor_ >= tensors_.size()) return error("more tensor data than declared");
  const TensorEntry& t = tensors_[current_tensor_];
  if (bytes.size() > t.n_bytes - current_written_) {
    return error("tensor '" + t.name + "' got more than its " + std::to_string(t.n_bytes) +
                 " bytes");
  }
  TRELLIS_TRY(write_bytes(bytes.data(), bytes.size()));
  current_written_ += bytes.size();
  if (current_written_ == t.n_bytes) {
    ++current_tensor_;
    current_written_ = 0;
    // Pad up to the next tensor's aligned offset; after the last one too, since readers that
    // load the data section whole (llama.cpp's, for an importance matrix) expect every tensor's
    // padded size.
    TRELLIS_TRY(write_padding(t.offset + t.n_bytes));
  }
  return {};
}

Status GgufWriter::finish() {
  if (out_ == nullptr) return error("finish before begin");
  // Tensors of zero bytes complete without any write_tensor_data call.
  while (current_tensor_ < tensors_.size() && tensors_[current_tensor_].n_bytes == 0) {
    TRELLIS_TRY(write_tensor_data({}));
  }
  if (current_tensor_ != tensors_.size()) {
    return error("tensor '" + tensors_[current_tensor_].name + "' is missing data");
  }
  int rc = std::fclose(out_);
  out_ = nullptr;
  if (rc != 0) return error(std::string("close failed: ") + std::strerror(errno));
  return {};
}

}  // namespace trellis
