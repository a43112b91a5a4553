#include "kv/kv_storage.h"

#include <cassert>
#include <cstdlib>
#include <cstring>
#include <string>

namespace trellis {

Result<KvStorage> KvStorage::create(const KvLayout& layout, int32_t n_blocks) {
  if (layout.n_layer <= 0 || layout.n_kv_heads <= 0 || layout.head_dim <= 0 ||
      layout.block_size <= 0 || n_blocks <= 0) {
    return Error{"KV cache: invalid layout or block count " + std::to_string(n_blocks)};
  }
  KvStorage kv;
  kv.layout_ = layout;
  kv.n_blocks_ = n_blocks;
  kv.head_run_bytes_ = static_cast<size_t>(layout.block_size) *
                       static_cast<size_t>(layout.head_dim) * layout.element_bytes();
  const size_t bytes = layout.bytes_per_block() * static_cast<size_t>(n_blocks);
  // calloc, not a zero-filled vector: a large pool comes as fresh zero pages that the OS maps on
  // first write, so the resident memory grows with the blocks in use, not the pool's size.
  kv.storage_.reset(static_cast<uint8_t*>(std::calloc(bytes, 1)));
  if (kv.storage_ == nullptr) {
    return Error{"KV cache: cannot allocate " + std::to_string(bytes) + " bytes"};
  }
  return kv;
}

uint8_t* KvStorage::base(int32_t block, int64_t layer, int kv, int64_t kv_head) {
  assert(block >= 0 && block < n_blocks_);
  assert(layer >= 0 && layer < layout_.n_layer && kv_head >= 0 && kv_head < layout_.n_kv_heads);
  const size_t per_kv = head_run_bytes_ * static_cast<size_t>(layout_.n_kv_heads);
  const size_t per_layer = 2 * per_kv;
  size_t offset = static_cast<size_t>(block) * layout_.bytes_per_block() +
                  static_cast<size_t>(layer) * per_layer + static_cast<size_t>(kv) * per_kv +
                  static_cast<size_t>(kv_head) * head_run_bytes_;
  return storage_.get() + offset;
}

void KvStorage::copy_block(int32_t src, int32_t dst, int32_t n_slots) {
  assert(n_slots >= 0 && n_slots <= layout_.block_size);
  if (copy_log_ != nullptr) copy_log_->push_back(BlockCopy{src, dst, n_slots});
  const size_t run = static_cast<size_t>(n_slots) * static_cast<size_t>(layout_.head_dim) *
                     layout_.element_bytes();
  for (int64_t layer = 0; layer < layout_.n_layer; ++layer) {
    for (int64_t head = 0; head < layout_.n_kv_heads; ++head) {
      std::memcpy(keys(dst, layer, head), keys(src, layer, head), run);
      std::memcpy(values(dst, layer, head), values(src, layer, head), run);
    }
  }
}

}  // namespace trellis
