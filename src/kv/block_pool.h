// The one owner of KV block bookkeeping: reference counts and the free list.
//
// A block is free (refcount 0, on the free list) or held (refcount >= 1). Holders are block tables
// of running sequences (and, later, the prefix cache). Only this class changes refcounts.
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"

namespace trellis {

class BlockPool {
 public:
  explicit BlockPool(int32_t n_blocks);

  int32_t n_total() const { return static_cast<int32_t>(refcounts_.size()); }
  int32_t n_free() const { return static_cast<int32_t>(free_list_.size()); }
  int32_t n_used() const { return n_total() - n_free(); }
  int32_t peak_used() const { return peak_used_; }

  bool can_alloc(int32_t n) const { return n >= 0 && n <= n_free(); }
  // Takes n free blocks, each with refcount 1. Precondition: can_alloc(n).
  // Lowest ids come first on a fresh pool; released blocks are reused most recent first.
  void alloc(int32_t n, std::vector<int32_t>& out);
  // Another holder for a held block. Precondition: refcount(id) > 0.
  void retain(int32_t id);
  // One holder fewer; the block returns to the free list when none is left.
  void release(int32_t id);
  void release_all(const std::vector<int32_t>& ids);
  int32_t refcount(int32_t id) const { return refcounts_[static_cast<size_t>(id)]; }

  // Every block is either free exactly once with refcount 0, or held with refcount > 0.
  Status check_invariants() const;

 private:
  std::vector<int32_t> refcounts_;
  std::vector<int32_t> free_list_;  // a stack: back() is handed out next
  int32_t peak_used_ = 0;
};

}  // namespace trellis
