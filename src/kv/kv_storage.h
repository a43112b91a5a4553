// Memory for keys and values, addressed by block id. A block holds `block_size` consecutive token
// positions of one sequence, for every layer:
//
//   block b:  layer 0: K [kv_head][slot][key row]  V [kv_head][slot][value row]
//             layer 1: K ...                        V ...
//
// A row is one head's head_dim elements of one position, in the keys' or the values' type (they
// may differ): f16 or f32 elements, or q8_0 / q4_0 blocks of 32 elements (the GGUF block layouts:
// an f16 scale, then 32 int8 codes or 16 bytes of 4-bit codes), so a quantized row is head_dim / 32
// blocks. Keeping one head's slots contiguous lets attention stream a head's keys without striding.
// KvStorage knows nothing of who owns a block: the block pool and block tables decide that.
//
// Layers that attend to a sliding window only (KvLayout::windowed) may be kept apart, in pages:
// a block then holds the other layers, and page_of(block) the windowed layers' KV of the same
// positions, or none once no reader is left for it (kv/window_pages.h decides when):
//
//   block b:  the full-attention layers, as above
//   page page_of(b) (or -1):  the windowed layers, in the same order
//
// keys() and values() find either, so kernels read a block table the same way for every layer;
// only positions that a windowed layer's window reaches may be read through it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"

namespace trellis {

enum class KvType { F16, F32, Q8_0, Q4_0 };

// "f16", "f32", "q8_0", "q4_0"; and back (false for any other name).
const char* kv_type_name(KvType type);
bool parse_kv_type(const std::string& name, KvType* type);
// Elements per quantization block: 32 for q8_0 and q4_0, 1 for the float types.
int64_t kv_type_block_elements(KvType type);
// Bytes of a row of n elements (n a multiple of kv_type_block_elements(type)).
size_t kv_row_bytes(KvType type, int64_t n);

// The element types of keys and of values (as llama.cpp's --cache-type-k and -v, they may differ).
struct KvTypes {
  KvType key = KvType::F16;
  KvType value = KvType::F16;
  static KvTypes both(KvType type) { return {type, type}; }
  bool operator==(const KvTypes&) const = default;
};
// "q8_0" when both are the same type, "K q8_0, V f16" otherwise.
std::string kv_types_name(const KvTypes& types);

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
  KvTypes types = {};
  // windowed[l] != 0: layer l's KV lives in window pages; empty: every layer lives in blocks.
  std::vector<uint8_t> windowed = {};

  size_t key_row_bytes() const { return kv_row_bytes(types.key, head_dim); }
  size_t value_row_bytes() const { return kv_row_bytes(types.value, head_dim); }
  bool is_windowed(int64_t layer) const {
    return !windowed.empty() && windowed[static_cast<size_t>(layer)] != 0;
  }
  int64_t n_windowed_layers() const;
  // K and V of all layers for one token position: n_layer x n_kv_heads rows of each.
  size_t bytes_per_token() const { return bytes_per_layer_token() * static_cast<size_t>(n_layer); }
  // What a block holds: its positions' KV in every layer that is not windowed.
  size_t bytes_per_block() const {
    return bytes_per_layer_token() * static_cast<size_t>(n_layer - n_windowed_layers()) *
           static_cast<size_t>(block_size);
  }
  // What a window page holds: the same positions' KV in the windowed layers.
  size_t bytes_per_page() const {
    return bytes_per_layer_token() * static_cast<size_t>(n_windowed_layers() * block_size);
  }
  // One layer's K and V for one position.
  size_t bytes_per_layer_token() const {
    return static_cast<size_t>(n_kv_heads) * (key_row_bytes() + value_row_bytes());
  }
};

class KvStorage {
 public:
  // Allocates n_blocks blocks (and n_pages window pages, when the layout has windowed layers) up
  // front; fails cleanly when the memory is not available, when a quantized type's blocks do not
  // tile a head (head_dim not a multiple of 32), or when windowed layers get no page.
  static Result<KvStorage> create(const KvLayout& layout, int32_t n_blocks, int32_t n_pages = 0);

  const KvLayout& layout() const { return layout_; }
  int32_t n_blocks() const { return n_blocks_; }
  int32_t n_pages() const { return n_pages_; }
  size_t bytes() const {
    return layout_.bytes_per_block() * static_cast<size_t>(n_blocks_) +
           layout_.bytes_per_page() * static_cast<size_t>(n_pages_);
  }

  // The window page holding block `block`'s windowed layers, or -1. Set by the page owner
  // (kv/window_pages.h) between forward passes.
  int32_t page_of(int32_t block) const { return page_of_[static_cast<size_t>(block)]; }
  void set_page(int32_t block, int32_t page) { page_of_[static_cast<size_t>(block)] = page; }

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
  // Precondition: no layer is windowed.
  uint8_t* block_data(int32_t block) {
    return storage_.get() + static_cast<size_t>(block) * layout_.bytes_per_block();
  }
  const uint8_t* block_data(int32_t block) const {
    return const_cast<KvStorage*>(this)->block_data(block);
  }
  // Copies every layer's keys and values of slots [0, n_slots) from block `src` to block `dst`
  // (copy-on-write of a partially shared block). Precondition: with windowed layers, both blocks
  // have a page.
  void copy_block(int32_t src, int32_t dst, int32_t n_slots);
  // When the layers are split over processes, every one of them must make the same copies in its
  // own storage: with a log, copy_block also appends each copy to it (null: no log).
  void log_copies_to(std::vector<BlockCopy>* log) { copy_log_ = log; }

 private:
  uint8_t* base(int32_t block, int64_t layer, int kv, int64_t kv_head);

  struct FreeBytes {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  using Memory = std::unique_ptr<uint8_t[], FreeBytes>;
  static Result<Memory> allocate(size_t bytes);

  KvLayout layout_;
  int32_t n_blocks_ = 0;
  int32_t n_pages_ = 0;
  size_t key_run_bytes_ = 0;    // block_size key rows
  size_t value_run_bytes_ = 0;  // block_size value rows
  // Layer l is the group_index_[l]-th layer of its kind (windowed or not), which is its place in
  // a page or a block.
  std::vector<int64_t> group_index_;
  std::vector<int32_t> page_of_;  // per block, -1: no page
  Memory storage_;
  Memory pages_;
  std::vector<BlockCopy>* copy_log_ = nullptr;
};

}  // namespace trellis
