#include "kv/block_pool.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <string>

namespace trellis {

BlockPool::BlockPool(int32_t n_blocks)
    : refcounts_(static_cast<size_t>(n_blocks), 0),
      tree_refs_(static_cast<size_t>(n_blocks), 0),
      generations_(static_cast<size_t>(n_blocks), 0) {
  assert(n_blocks >= 0);
  free_list_.reserve(static_cast<size_t>(n_blocks));
  for (BlockId id = n_blocks - 1; id >= 0; --id) free_list_.push_back(id);
}

void BlockPool::account(BlockId id, int32_t old_refcount, int32_t old_tree_refs) {
  const int32_t rc = refcount(id);
  const int32_t tr = tree_refs(id);
  n_cached_ += (tr > 0 ? 1 : 0) - (old_tree_refs > 0 ? 1 : 0);
  n_in_use_ += (rc > tr ? 1 : 0) - (old_refcount > old_tree_refs ? 1 : 0);
  peak_in_use_ = std::max(peak_in_use_, n_in_use_);
}

void BlockPool::alloc(int32_t n, std::vector<BlockId>& out) {
  assert(can_alloc(n));
  for (int32_t i = 0; i < n; ++i) {
    const BlockId id = free_list_.back();
    free_list_.pop_back();
    refcounts_[index(id)] = 1;
    ++generations_[index(id)];
    account(id, 0, 0);
    out.push_back(id);
  }
  n_allocated_ += n;
  peak_used_ = std::max(peak_used_, n_used());
}

void BlockPool::retain(BlockId id) {
  assert(refcount(id) > 0);
  const int32_t old_rc = refcount(id);
  ++refcounts_[index(id)];
  account(id, old_rc, tree_refs(id));
  ++n_acquired_;
}

void BlockPool::release(BlockId id) {
  assert(request_refs(id) > 0);
  const int32_t old_rc = refcount(id);
  const bool freed = --refcounts_[index(id)] == 0;
  account(id, old_rc, tree_refs(id));
  if (freed) push_free(id);
}

void BlockPool::push_free(BlockId id) {
  free_list_.push_back(id);
  if (on_free_) on_free_(id);
}

void BlockPool::release_all(const std::vector<BlockId>& ids) {
  for (BlockId id : ids) release(id);
}

void BlockPool::cache_retain(BlockId id) {
  assert(refcount(id) > 0);
  const int32_t old_rc = refcount(id);
  const int32_t old_tr = tree_refs(id);
  ++refcounts_[index(id)];
  ++tree_refs_[index(id)];
  account(id, old_rc, old_tr);
}

bool BlockPool::cache_release(BlockId id) {
  const bool freed = drop_tree_ref(id);
  if (freed) ++n_evicted_;
  return freed;
}

void BlockPool::cache_swap(BlockId from, BlockId to) {
  cache_retain(to);
  drop_tree_ref(from);
}

bool BlockPool::drop_tree_ref(BlockId id) {
  assert(tree_refs(id) > 0);
  const int32_t old_rc = refcount(id);
  const int32_t old_tr = tree_refs(id);
  --tree_refs_[index(id)];
  const bool freed = --refcounts_[index(id)] == 0;
  account(id, old_rc, old_tr);
  if (freed) push_free(id);
  return freed;
}

Status BlockPool::check_invariants() const {
  std::vector<int> on_free_list(refcounts_.size(), 0);
  for (BlockId id : free_list_) {
    if (id < 0 || id >= n_total())
      return Error{"block pool: free list holds invalid id " + std::to_string(id)};
    if (++on_free_list[index(id)] > 1)
      return Error{"block pool: block " + std::to_string(id) + " is on the free list twice"};
  }
  int32_t n_cached = 0;
  int32_t n_in_use = 0;
  int32_t n_cached_only = 0;
  for (size_t id = 0; id < refcounts_.size(); ++id) {
    const bool free = on_free_list[id] == 1;
    const int32_t rc = refcounts_[id];
    const int32_t tr = tree_refs_[id];
    if (rc < 0 || free != (rc == 0)) {
      return Error{"block pool: block " + std::to_string(id) + " has refcount " +
                   std::to_string(rc) + (free ? " but is free" : " but is not free")};
    }
    if (tr < 0 || tr > rc) {
      return Error{"block pool: block " + std::to_string(id) + " has " + std::to_string(tr) +
                   " tree references but refcount " + std::to_string(rc)};
    }
    n_cached += tr > 0 ? 1 : 0;
    n_in_use += rc > tr ? 1 : 0;
    n_cached_only += (rc > 0 && rc == tr) ? 1 : 0;
  }
  if (n_cached != n_cached_ || n_in_use != n_in_use_) {
    return Error{"block pool: counted " + std::to_string(n_cached) + " cached and " +
                 std::to_string(n_in_use) + " in use, the counters say " +
                 std::to_string(n_cached_) + " and " + std::to_string(n_in_use_)};
  }
  if (n_free() + n_cached_only + n_in_use != n_total()) {
    return Error{"block pool: free " + std::to_string(n_free()) + " + cached-only " +
                 std::to_string(n_cached_only) + " + in use " + std::to_string(n_in_use) +
                 " != total " + std::to_string(n_total())};
  }
  if (peak_used_ < n_used() || peak_in_use_ < n_in_use_)
    return Error{"block pool: a peak is below the current value"};
  return {};
}

Result<int64_t> parse_byte_size(std::string_view text) {
  const std::string shown = "memory size \"" + std::string(text) + "\"";
  size_t n_digits = 0;
  while (n_digits < text.size() && text[n_digits] >= '0' && text[n_digits] <= '9') ++n_digits;
  if (n_digits == 0) {
    return Error{shown + ": expected a whole number of bytes with an optional suffix " +
                 "B, KiB, MiB or GiB (e.g. 512MiB)"};
  }
  constexpr int64_t kMax = int64_t{1} << 62;
  int64_t value = 0;
  for (size_t i = 0; i < n_digits; ++i) {
    const int digit = text[i] - '0';
    if (value > (kMax - digit) / 10) return Error{shown + " is too large"};
    value = value * 10 + digit;
  }
  const std::string_view suffix = text.substr(n_digits);
  int64_t unit = 0;
  if (suffix.empty() || suffix == "B") {
    unit = 1;
  } else if (suffix == "KiB") {
    unit = int64_t{1} << 10;
  } else if (suffix == "MiB") {
    unit = int64_t{1} << 20;
  } else if (suffix == "GiB") {
    unit = int64_t{1} << 30;
  } else {
    return Error{shown + ": unknown suffix \"" + std::string(suffix) +
                 "\" (use B, KiB, MiB or GiB; KB/MB/GB are ambiguous)"};
  }
  if (value > kMax / unit) return Error{shown + " is too large"};
  return value * unit;
}

Result<int32_t> blocks_for_bytes(int64_t budget_bytes, int64_t bytes_per_block) {
  assert(bytes_per_block > 0);
  const int64_t n = budget_bytes / bytes_per_block;
  if (n < 1) {
    return Error{"a KV memory budget of " + std::to_string(budget_bytes) +
                 " bytes does not hold one block of " + std::to_string(bytes_per_block) + " bytes"};
  }
  if (n > std::numeric_limits<int32_t>::max())
    return Error{"a KV memory budget of " + std::to_string(budget_bytes) + " bytes is too large"};
  return static_cast<int32_t>(n);
}

Result<int32_t> blocks_for_tokens(int64_t n_tokens, int32_t block_size) {
  assert(block_size > 0);
  if (n_tokens <= 0)
    return Error{"a KV token count must be positive, got " + std::to_string(n_tokens)};
  const int64_t n = (n_tokens - 1) / block_size + 1;
  if (n > std::numeric_limits<int32_t>::max())
    return Error{"a KV token count of " + std::to_string(n_tokens) + " is too large"};
  return static_cast<int32_t>(n);
}

}  // namespace trellis
