#include "kv/kv_storage.h"

#include <cassert>
#include <cstdlib>
#include <cstring>
#include <string>

namespace trellis {

const char* kv_type_name(KvType type) {
  switch (type) {
    case KvType::F16:
      return "f16";
    case KvType::F32:
      return "f32";
    case KvType::Q8_0:
      return "q8_0";
    case KvType::Q4_0:
      return "q4_0";
  }
  return "?";
}

bool parse_kv_type(const std::string& name, KvType* type) {
  for (KvType t : {KvType::F16, KvType::F32, KvType::Q8_0, KvType::Q4_0}) {
    if (name == kv_type_name(t)) {
      *type = t;
      return true;
    }
  }
  return false;
}

int64_t kv_type_block_elements(KvType type) {
  return type == KvType::Q8_0 || type == KvType::Q4_0 ? 32 : 1;
}

size_t kv_row_bytes(KvType type, int64_t n) {
  const auto elements = static_cast<size_t>(n);
  switch (type) {
    case KvType::F16:
      return 2 * elements;
    case KvType::F32:
      return 4 * elements;
    case KvType::Q8_0:
      return elements / 32 * 34;  // f16 scale + 32 int8 codes
    case KvType::Q4_0:
      return elements / 32 * 18;  // f16 scale + 16 bytes of 4-bit codes
  }
  return 0;
}

std::string kv_types_name(const KvTypes& types) {
  if (types.key == types.value) return kv_type_name(types.key);
  return std::string("K ") + kv_type_name(types.key) + ", V " + kv_type_name(types.value);
}

int64_t KvLayout::n_windowed_layers() const {
  int64_t n = 0;
  for (uint8_t w : windowed) n += w != 0 ? 1 : 0;
  return n;
}

Result<KvStorage::Memory> KvStorage::allocate(size_t bytes) {
  // calloc, not a zero-filled vector: a large pool comes as fresh zero pages that the OS maps on
  // first write, so the resident memory grows with the blocks in use, not the pool's size.
  Memory memory(static_cast<uint8_t*>(std::calloc(bytes == 0 ? 1 : bytes, 1)));
  if (memory == nullptr)
    return Error{"KV cache: cannot allocate " + std::to_string(bytes) + " bytes"};
  return memory;
}

Result<KvStorage> KvStorage::create(const KvLayout& layout, int32_t n_blocks, int32_t n_pages) {
  const bool windowed_ok =
      layout.windowed.empty() || static_cast<int64_t>(layout.windowed.size()) == layout.n_layer;
  if (layout.n_layer <= 0 || layout.n_kv_heads <= 0 || layout.head_dim <= 0 ||
      layout.block_size <= 0 || n_blocks <= 0 || n_pages < 0 || !windowed_ok) {
    return Error{"KV cache: invalid layout or block count " + std::to_string(n_blocks)};
  }
  if ((layout.n_windowed_layers() > 0) != (n_pages > 0)) {
    return Error{"KV cache: windowed layers need window pages, and pages need windowed layers"};
  }
  for (KvType type : {layout.types.key, layout.types.value}) {
    if (layout.head_dim % kv_type_block_elements(type) != 0) {
      return Error{std::string("KV cache type ") + kv_type_name(type) +
                   " stores a head in blocks of " + std::to_string(kv_type_block_elements(type)) +
                   " elements; this model's heads have " + std::to_string(layout.head_dim) +
                   " (use f16)"};
    }
  }
  KvStorage kv;
  kv.layout_ = layout;
  kv.n_blocks_ = n_blocks;
  kv.n_pages_ = n_pages;
  kv.key_run_bytes_ = static_cast<size_t>(layout.block_size) * layout.key_row_bytes();
  kv.value_run_bytes_ = static_cast<size_t>(layout.block_size) * layout.value_row_bytes();
  int64_t counts[2] = {0, 0};  // layers in blocks, layers in pages
  for (int64_t l = 0; l < layout.n_layer; ++l)
    kv.group_index_.push_back(counts[layout.is_windowed(l) ? 1 : 0]++);
  kv.page_of_.assign(static_cast<size_t>(n_blocks), -1);
  Result<Memory> blocks = allocate(layout.bytes_per_block() * static_cast<size_t>(n_blocks));
  if (!blocks.ok()) return blocks.error();
  kv.storage_ = std::move(blocks).value();
  if (n_pages > 0) {
    Result<Memory> pages = allocate(layout.bytes_per_page() * static_cast<size_t>(n_pages));
    if (!pages.ok()) return pages.error();
    kv.pages_ = std::move(pages).value();
  }
  return kv;
}

uint8_t* KvStorage::base(int32_t block, int64_t layer, int kv, int64_t kv_head) {
  assert(block >= 0 && block < n_blocks_);
  assert(layer >= 0 && layer < layout_.n_layer && kv_head >= 0 && kv_head < layout_.n_kv_heads);
  const size_t heads = static_cast<size_t>(layout_.n_kv_heads);
  const size_t per_layer = (key_run_bytes_ + value_run_bytes_) * heads;
  const size_t run = kv == 0 ? key_run_bytes_ : value_run_bytes_;
  const size_t in_unit = static_cast<size_t>(group_index_[static_cast<size_t>(layer)]) * per_layer +
                         (kv == 0 ? 0 : key_run_bytes_ * heads) +
                         static_cast<size_t>(kv_head) * run;
  if (layout_.is_windowed(layer)) {
    const int32_t page = page_of(block);
    assert(page >= 0 && "a windowed layer read outside its window");
    return pages_.get() + static_cast<size_t>(page) * layout_.bytes_per_page() + in_unit;
  }
  return storage_.get() + static_cast<size_t>(block) * layout_.bytes_per_block() + in_unit;
}

void KvStorage::copy_block(int32_t src, int32_t dst, int32_t n_slots) {
  assert(n_slots >= 0 && n_slots <= layout_.block_size);
  if (copy_log_ != nullptr) copy_log_->push_back(BlockCopy{src, dst, n_slots});
  const size_t key_bytes = static_cast<size_t>(n_slots) * layout_.key_row_bytes();
  const size_t value_bytes = static_cast<size_t>(n_slots) * layout_.value_row_bytes();
  assert(layout_.n_windowed_layers() == 0 || (page_of(src) >= 0 && page_of(dst) >= 0));
  for (int64_t layer = 0; layer < layout_.n_layer; ++layer) {
    for (int64_t head = 0; head < layout_.n_kv_heads; ++head) {
      std::memcpy(keys(dst, layer, head), keys(src, layer, head), key_bytes);
      std::memcpy(values(dst, layer, head), values(src, layer, head), value_bytes);
    }
  }
}

}  // namespace trellis
