#include "kv/block_pool.h"

#include <algorithm>
#include <cassert>
#include <string>

namespace trellis {

BlockPool::BlockPool(int32_t n_blocks) : refcounts_(static_cast<size_t>(n_blocks), 0) {
  free_list_.reserve(static_cast<size_t>(n_blocks));
  for (int32_t id = n_blocks - 1; id >= 0; --id) free_list_.push_back(id);
}

void BlockPool::alloc(int32_t n, std::vector<int32_t>& out) {
  assert(can_alloc(n));
  for (int32_t i = 0; i < n; ++i) {
    int32_t id = free_list_.back();
    free_list_.pop_back();
    refcounts_[static_cast<size_t>(id)] = 1;
    out.push_back(id);
  }
  peak_used_ = std::max(peak_used_, n_used());
}

void BlockPool::retain(int32_t id) {
  assert(refcount(id) > 0);
  ++refcounts_[static_cast<size_t>(id)];
}

void BlockPool::release(int32_t id) {
  assert(refcount(id) > 0);
  if (--refcounts_[static_cast<size_t>(id)] == 0) free_list_.push_back(id);
}

void BlockPool::release_all(const std::vector<int32_t>& ids) {
  for (int32_t id : ids) release(id);
}

Status BlockPool::check_invariants() const {
  std::vector<int> on_free_list(refcounts_.size(), 0);
  for (int32_t id : free_list_) {
    if (id < 0 || id >= n_total())
      return Error{"block pool: free list holds invalid id " + std::to_string(id)};
    if (++on_free_list[static_cast<size_t>(id)] > 1)
      return Error{"block pool: block " + std::to_string(id) + " is on the free list twice"};
  }
  for (size_t id = 0; id < refcounts_.size(); ++id) {
    bool free = on_free_list[id] == 1;
    if (refcounts_[id] < 0 || free != (refcounts_[id] == 0)) {
      return Error{"block pool: block " + std::to_string(id) + " has refcount " +
                   std::to_string(refcounts_[id]) + (free ? " but is free" : " but is not free")};
    }
  }
  return {};
}

}  // namespace trellis
