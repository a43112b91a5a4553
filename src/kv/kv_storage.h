// Memory for keys and values, addressed by block id. A block holds `block_size` consecutive token
// positions of one sequence, for every layer:
//
//   block b:  layer 0: K [kv_head][slot][head_dim]  V [kv_head][slot][head_dim]
//             layer 1: K ...                         V ...
//
// Keeping one head's slots contiguous lets attention stream a head's keys without striding.
// KvStorage knows nothing of who owns a block: the block pool and block tables decide that.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "base/result.h"

namespace trellis {

enum class KvType { F16, F32 };

// One copy-on-write copy: slots [0, n_slots) of block src into block dst.
struct BlockCopy {
  int32_t src = 0;
  int32_t dst = 0;
  int32_t n_slots = 0;
};

struct KvLayout {
  int64_t n_layer = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int32_t block_size = 32;  // token positions per block
  KvType type = KvType::F16;

  size_t element_bytes() const { return type == KvType::F16 ? 2 : 4; }
  // K and V of all layers for one token position: 2 x n_layer x n_kv_heads x head_dim elements.
  size_t bytes_per_token() const {
    return 2 * static_cast<size_t>(n_layer * n_kv_heads * head_dim) * element_bytes();
  }
  size_t bytes_per_block() const { return bytes_per_token() * static_cast<size_t>(block_size); }
};

class KvStorage {
 public:
  // Allocates n_blocks blocks up front; fails cleanly when the memory is not available.
  static Result<KvStorage> create(const KvLayout& layout, int32_t n_blocks);

  const KvLayout& layout() const { return layout_; }
  int32_t n_blocks() const { return n_blocks_; }
  size_t bytes() const { return layout_.bytes_per_block() * static_cast<size_t>(n_blocks_); }

  // Start of the [slot][head_dim] run of one head's keys (or values) in one block and layer.
  uint8_t* keys(int32_t block, int64_t layer, int64_t kv_head) {
    return base(block, layer, 0, kv_head);
  }
  uint8_t* values(int32_t block, int64_t layer, int64_t kv_head) {
    return base(block, layer, 1, kv_head);
  }
  const uint8_t* keys(int32_t block, int64_t layer, int64_t kv_head) const {
    return const_cast<KvStorage*>(this)->keys(block, layer, kv_head);
  }
  const uint8_t* values(int32_t block, int64_t layer, int64_t kv_head) const {
    return const_cast<KvStorage*>(this)->values(block, layer, kv_head);
  }
  // All of one block's bytes (every layer's keys and values), bytes_per_block() long: blocks are
  // contiguous, so a whole block can be saved and restored as one run (the disk tier).
  uint8_t* block_data(int32_t block) { return base(block, 0, 0, 0); }
  const uint8_t* block_data(int32_t block) const {
    return const_cast<KvStorage*>(this)->block_data(block);
  }
  // Copies every layer's keys and values of slots [0, n_slots) from block `src` to block `dst`
  // (copy-on-write of a partially shared block).
  void copy_block(int32_t src, int32_t dst, int32_t n_slots);
  // When the layers are split over processes, every one of them must make the same copies in its
  // own storage: with a log, copy_block also appends each copy to it (null: no log).
  void log_copies_to(std::vector<BlockCopy>* log) { copy_log_ = log; }

 private:
  uint8_t* base(int32_t block, int64_t layer, int kv, int64_t kv_head);

  KvLayout layout_;
  int32_t n_blocks_ = 0;
  size_t head_run_bytes_ = 0;  // block_size x head_dim elements
  struct FreeBytes {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t[], FreeBytes> storage_;
  std::vector<BlockCopy>* copy_log_ = nullptr;
};

}  // namespace trellis
