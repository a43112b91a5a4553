#include "gguf/gguf_file.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <unordered_set>

namespace trellis {

static_assert(std::endian::native == std::endian::little, "GGUF is read as little-endian");

namespace {

constexpr uint32_t kMaxDims = 4;         // GGUF_MAX_DIMS
constexpr int kMaxArrayNesting = 8;      // deeper nesting is hostile, not useful
constexpr uint64_t kMinKvBytes = 8 + 4;  // key length + value type (empty key, no payload)
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // name length, n_dims, type, offset

// Smallest encoded size of one value of `type`, used to bound counts before allocating.
uint64_t min_encoded_size(GgufType type) {
  switch (type) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::BOOL:
      return 1;
    case GgufType::UINT16:
    case GgufType::INT16:
      return 2;
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::FLOAT32:
      return 4;
    case GgufType::UINT64:
    case GgufType::INT64:
    case GgufType::FLOAT64:
    case GgufType::STRING:  // its u64 length
      return 8;
    case GgufType::ARRAY:  // item type + count
      return 12;
  }
  return 1;
}

bool is_known_value_type(uint32_t raw) {
  return raw <= static_cast<uint32_t>(GgufType::FLOAT64);
}

}  // namespace

// Reads the file front to back; every read is bounds-checked against the end of the bytes.
class GgufParser {
 public:
  GgufParser(GgufFile& file) : file_(file), bytes_(file.bytes_) {}

  Status parse() {
    uint32_t magic = 0;
    if (bytes_.size() < 4)
      return fail("file too small to be GGUF (" + std::to_string(bytes_.size()) + " bytes)");
    TRELLIS_TRY(read_pod(&magic, "magic"));
    if (magic != kGgufMagic) return fail("bad magic: not a GGUF file");
    TRELLIS_TRY(read_pod(&file_.version_, "version"));
    if (file_.version_ == 1) return fail("GGUF version 1 is not supported (only 2 and 3)");
    if (file_.version_ != 2 && file_.version_ != 3) {
      if (file_.version_ > 0xFFFF && (file_.version_ & 0xFFFF) == 0)
        return fail("big-endian GGUF files are not supported");
      return fail("unsupported GGUF version " + std::to_string(file_.version_));
    }
    uint64_t n_tensors = 0;
    uint64_t n_kv = 0;
    TRELLIS_TRY(read_pod(&n_tensors, "tensor count"));
    TRELLIS_TRY(read_pod(&n_kv, "metadata count"));
    if (n_kv > remaining() / kMinKvBytes)
      return fail("metadata count " + std::to_string(n_kv) + " exceeds what the file can hold");
    if (n_tensors > remaining() / kMinTensorInfoBytes)
      return fail("tensor count " + std::to_string(n_tensors) + " exceeds what the file can hold");

    TRELLIS_TRY(read_metadata(n_kv));
    TRELLIS_TRY(read_alignment());
    TRELLIS_TRY(read_tensor_infos(n_tensors));

    uint64_t align = file_.alignment_;
    uint64_t infos_end = pos_;
    file_.data_offset_ = (infos_end + align - 1) / align * align;
    return bind_tensor_data();
  }

 private:
  uint64_t remaining() const { return bytes_.size() - pos_; }

  Error fail(const std::string& what) const { return file_.error(what); }
  Error fail_at(const std::string& what) const {
    return file_.error(what + " at byte " + std::to_string(pos_));
  }

  template <typename T>
  Status read_pod(T* out, const char* what) {
    if (remaining() < sizeof(T)) return fail_at(std::string("truncated file: cannot read ") + what);
    std::memcpy(out, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return {};
  }

  Status read_string(std::string* out, const char* what) {
    uint64_t length = 0;
    TRELLIS_TRY(read_pod(&length, what));
    if (length > remaining()) {
      return fail_at(std::string(what) + " length " + std::to_string(length) +
                     " runs past the end of the file");
    }
    out->assign(reinterpret_cast<const char*>(bytes_.data() + pos_), length);
    pos_ += length;
    return {};
  }

  Status read_value(GgufType type, GgufValue* out, int depth) {
    switch (type) {
      case GgufType::UINT8:
        return read_scalar<uint8_t>(out);
      case GgufType::INT8:
        return read_scalar<int8_t>(out);
      case GgufType::UINT16:
        return read_scalar<uint16_t>(out);
      case GgufType::INT16:
        return read_scalar<int16_t>(out);
      case GgufType::UINT32:
        return read_scalar<uint32_t>(out);
      case GgufType::INT32:
        return read_scalar<int32_t>(out);
      case GgufType::FLOAT32:
        return read_scalar<float>(out);
      case GgufType::UINT64:
        return read_scalar<uint64_t>(out);
      case GgufType::INT64:
        return read_scalar<int64_t>(out);
      case GgufType::FLOAT64:
        return read_scalar<double>(out);
      case GgufType::BOOL: {
        uint8_t raw = 0;
        TRELLIS_TRY(read_pod(&raw, "bool value"));
        if (raw > 1) return fail_at("invalid bool value " + std::to_string(raw));
        out->storage = raw == 1;
        return {};
      }
      case GgufType::STRING: {
        std::string s;
        TRELLIS_TRY(read_string(&s, "string value"));
        out->storage = std::move(s);
        return {};
      }
      case GgufType::ARRAY:
        return read_array(out, depth + 1);
    }
    return fail_at("unknown metadata value type");
  }

  template <typename T>
  Status read_scalar(GgufValue* out) {
    T value{};
    TRELLIS_TRY(read_pod(&value, "metadata value"));
    out->storage = value;
    return {};
  }

  Status read_array(GgufValue* out, int depth) {
    if (depth > kMaxArrayNesting) return fail_at("arrays nested too deeply");
    uint32_t raw_type = 0;
    uint64_t count = 0;
    TRELLIS_TRY(read_pod(&raw_type, "array item type"));
    if (!is_known_value_type(raw_type))
      return fail_at("unknown array item type " + std::to_string(raw_type));
    TRELLIS_TRY(read_pod(&count, "array length"));
    auto item_type = static_cast<GgufType>(raw_type);
    if (count > remaining() / min_encoded_size(item_type)) {
      return fail_at("array length " + std::to_string(count) + " runs past the end of the file");
    }
    GgufArray array{item_type, {}};
    array.items.resize(count);
    for (GgufValue& item : array.items) TRELLIS_TRY(read_value(item_type, &item, depth));
    out->storage = std::move(array);
    return {};
  }

  Status read_metadata(uint64_t n_kv) {
    file_.kvs_.reserve(n_kv);
    std::unordered_set<std::string> seen;
    for (uint64_t i = 0; i < n_kv; ++i) {
      GgufKv kv;
      TRELLIS_TRY(read_string(&kv.key, "metadata key"));
      uint32_t raw_type = 0;
      TRELLIS_TRY(read_pod(&raw_type, "metadata value type"));
      if (!is_known_value_type(raw_type)) {
        return fail_at("metadata key '" + kv.key + "' has unknown value type " +
                       std::to_string(raw_type));
      }
      TRELLIS_TRY(read_value(static_cast<GgufType>(raw_type), &kv.value, 0));
      if (!seen.insert(kv.key).second) return fail("duplicate metadata key '" + kv.key + "'");
      file_.kvs_.push_back(std::move(kv));
    }
    return {};
  }

  Status read_alignment() {
    const GgufValue* value = file_.find("general.alignment");
    if (value == nullptr) return {};
    if (value->type() != GgufType::UINT32) return fail("general.alignment must be a uint32");
    uint32_t align = std::get<uint32_t>(value->storage);
    if (align == 0 || (align & (align - 1)) != 0) {
      return fail("general.alignment " + std::to_string(align) + " is not a power of two");
    }
    file_.alignment_ = align;
    return {};
  }

  Status read_tensor_infos(uint64_t n_tensors) {
    file_.tensors_.reserve(n_tensors);
    std::unordered_set<std::string> seen;
    for (uint64_t i = 0; i < n_tensors; ++i) {
      GgufTensor tensor{};
      TRELLIS_TRY(read_tensor_info(&tensor));
      if (!seen.insert(tensor.name).second)
        return fail("duplicate tensor name '" + tensor.name + "'");
      file_.tensors_.push_back(std::move(tensor));
    }
    return {};
  }

  Status read_tensor_info(GgufTensor* t) {
    TRELLIS_TRY(read_string(&t->name, "tensor name"));
    const std::string who = "tensor '" + t->name + "'";
    uint32_t n_dims = 0;
    TRELLIS_TRY(read_pod(&n_dims, "tensor dimension count"));
    if (n_dims > kMaxDims) {
      return fail(who + " has " + std::to_string(n_dims) + " dimensions (at most 4 allowed)");
    }
    t->shape.resize(n_dims);
    int64_t n_elements = 1;
    for (int64_t& dim : t->shape) {
      uint64_t raw = 0;
      TRELLIS_TRY(read_pod(&raw, "tensor dimension"));
      if (raw > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          (raw != 0 &&
           n_elements > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(raw))) {
        return fail(who + " has absurd dimensions: the element count overflows");
      }
      dim = static_cast<int64_t>(raw);
      n_elements *= dim;
    }
    t->n_elements = n_elements;
    uint32_t raw_type = 0;
    TRELLIS_TRY(read_pod(&raw_type, "tensor type"));
    std::optional<DTypeInfo> info = dtype_info(raw_type);
    if (!info) return fail(who + " has unknown tensor type " + std::to_string(raw_type));
    t->type = info->type;
    int64_t row_length = t->shape.empty() ? 1 : t->shape[0];
    if (row_length % info->block_elems != 0) {
      return fail(who + " row length " + std::to_string(row_length) + " is not a multiple of the " +
                  std::string(info->name) + " block size " + std::to_string(info->block_elems));
    }
    // n_elements / block_elems * block_bytes cannot overflow: block_bytes / block_elems <= 8.
    t->n_bytes = static_cast<uint64_t>(n_elements / info->block_elems) *
                 static_cast<uint64_t>(info->block_bytes);
    TRELLIS_TRY(read_pod(&t->offset, "tensor data offset"));
    return {};
  }

  Status bind_tensor_data() {
    uint64_t file_size = bytes_.size();
    if (file_.tensors_.empty()) return {};
    if (file_.data_offset_ > file_size)
      return fail("truncated file: tensor data section is missing");
    uint64_t data_size = file_size - file_.data_offset_;
    std::vector<const GgufTensor*> by_offset;
    for (GgufTensor& t : file_.tensors_) {
      if (t.offset % file_.alignment_ != 0) {
        return fail("tensor '" + t.name + "' data offset " + std::to_string(t.offset) +
                    " is not aligned to " + std::to_string(file_.alignment_));
      }
      if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
        return fail("tensor '" + t.name + "' data (offset " + std::to_string(t.offset) + ", " +
                    std::to_string(t.n_bytes) + " bytes) runs past the end of the file");
      }
      t.data = bytes_.data() + file_.data_offset_ + t.offset;
      by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
      const GgufTensor& prev = *by_offset[i - 1];
      if (prev.offset + prev.n_bytes > by_offset[i]->offset) {
        return fail("tensors '" + prev.name + "' and '" + by_offset[i]->name + "' overlap");
      }
    }
    return {};
  }

  GgufFile& file_;
  std::span<const uint8_t> bytes_;
  uint64_t pos_ = 0;
};

Result<GgufFile> GgufFile::open(const std::string& path) {
  Result<MappedFile> mapped = MappedFile::open(path);
  if (!mapped.ok()) return mapped.error();
  auto mapping = std::make_shared<MappedFile>(std::move(mapped).value());
  Result<GgufFile> file = parse(mapping->bytes(), path);
  if (file.ok()) file->mapping_ = std::move(mapping);
  return file;
}

void GgufFile::release_pages(std::span<const uint8_t> bytes) const {
  if (mapping_ != nullptr) mapping_->release(bytes);
}

Result<GgufFile> GgufFile::parse(std::span<const uint8_t> bytes, const std::string& name) {
  GgufFile file;
  file.name_ = name;
  file.bytes_ = bytes;
  GgufParser parser(file);
  Status status = parser.parse();
  if (!status.ok()) return status.error();
  return file;
}

Error GgufFile::error(std::string_view what) const {
  return Error{name_ + ": " + std::string(what)};
}

const GgufValue* GgufFile::find(std::string_view key) const {
  for (const GgufKv& kv : kvs_) {
    if (kv.key == key) return &kv.value;
  }
  return nullptr;
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  for (const GgufTensor& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

namespace {
std::string describe_key(std::string_view key) {
  return "metadata key '" + std::string(key) + "'";
}
}  // namespace

Result<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return error("missing " + describe_key(key));
  int64_t out = 0;
  if (!value->is_integer()) {
    return error(describe_key(key) + " is a " + std::string(gguf_type_name(value->type())) +
                 ", expected an integer");
  }
  if (!value->as_int64(&out)) return error(describe_key(key) + " is out of range");
  return out;
}

Result<uint32_t> GgufFile::get_u32(std::string_view key) const {
  Result<int64_t> value = get_int(key);
  if (!value.ok()) return value.error();
  if (*value < 0 || *value > std::numeric_limits<uint32_t>::max())
    return error(describe_key(key) + " value " + std::to_string(*value) + " is out of range");
  return static_cast<uint32_t>(*value);
}

Result<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return error("missing " + describe_key(key));
  if (!value->is_float()) {
    return error(describe_key(key) + " is a " + std::string(gguf_type_name(value->type())) +
                 ", expected a float");
  }
  return value->as_double();
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return error("missing " + describe_key(key));
  if (value->type() != GgufType::BOOL) return error(describe_key(key) + " is not a bool");
  return std::get<bool>(value->storage);
}

Result<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return error("missing " + describe_key(key));
  if (value->type() != GgufType::STRING) return error(describe_key(key) + " is not a string");
  return std::get<std::string>(value->storage);
}

Result<const GgufArray*> GgufFile::get_array(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return error("missing " + describe_key(key));
  if (value->type() != GgufType::ARRAY) return error(describe_key(key) + " is not an array");
  return &std::get<GgufArray>(value->storage);
}

Result<int64_t> GgufFile::get_int_or(std::string_view key, int64_t fallback) const {
  return has(key) ? get_int(key) : Result<int64_t>(fallback);
}
Result<double> GgufFile::get_float_or(std::string_view key, double fallback) const {
  return has(key) ? get_float(key) : Result<double>(fallback);
}
Result<bool> GgufFile::get_bool_or(std::string_view key, bool fallback) const {
  return has(key) ? get_bool(key) : Result<bool>(fallback);
}
Result<std::string> GgufFile::get_string_or(std::string_view key, std::string fallback) const {
  return has(key) ? get_string(key) : Result<std::string>(std::move(fallback));
}

}  // namespace trellis
