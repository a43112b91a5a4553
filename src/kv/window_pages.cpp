#include "kv/window_pages.h"

#include <algorithm>
#include <cassert>
#include <string>

namespace trellis {

WindowPages::WindowPages(KvStorage& kv, BlockPool& pool)
    : kv_(kv),
      pool_(pool),
      n_total_(kv.n_pages()),
      holders_(static_cast<size_t>(pool.n_total()), 0),
      prev_(static_cast<size_t>(pool.n_total()), kNone),
      next_(static_cast<size_t>(pool.n_total()), kNone),
      evictable_(static_cast<size_t>(pool.n_total()), 0) {
  assert(kv.n_blocks() >= pool.n_total());
  free_pages_.reserve(static_cast<size_t>(n_total_));
  for (int32_t page = n_total_ - 1; page >= 0; --page) free_pages_.push_back(page);
  pool_.set_free_listener([this](BlockId block) { block_freed(block); });
}

bool WindowPages::try_reserve(int32_t n) {
  if (n < 0 || n_reserved_ + n > n_total_) return false;
  n_reserved_ += n;
  return true;
}

void WindowPages::unreserve(int32_t n) {
  assert(n >= 0 && n <= n_reserved_);
  n_reserved_ -= n;
}

void WindowPages::hold(BlockId block) {
  assert(pool_.refcount(block) > 0);
  if (has_page(block)) {
    if (evictable_[index(block)] != 0) remove_evictable(block);
  } else {
    if (free_pages_.empty()) {
      assert(oldest_ != kNone && "a hold beyond the reservations");
      const BlockId victim = oldest_;
      remove_evictable(victim);
      free_page_of(victim);
      ++n_evicted_;
    }
    kv_.set_page(block, free_pages_.back());
    free_pages_.pop_back();
  }
  ++holders_[index(block)];
  peak_held_ = std::max(peak_held_, n_held());
}

void WindowPages::let_go(BlockId block) {
  assert(holders(block) > 0 && has_page(block));
  if (--holders_[index(block)] > 0) return;
  if (pool_.tree_refs(block) > 0) {
    push_evictable(block);
  } else {
    free_page_of(block);
  }
}

void WindowPages::block_freed(BlockId block) {
  if (!has_page(block)) return;
  assert(holders(block) == 0);
  if (evictable_[index(block)] != 0) remove_evictable(block);
  free_page_of(block);
}

void WindowPages::free_page_of(BlockId block) {
  free_pages_.push_back(kv_.page_of(block));
  kv_.set_page(block, -1);
}

void WindowPages::push_evictable(BlockId block) {
  evictable_[index(block)] = 1;
  prev_[index(block)] = newest_;
  next_[index(block)] = kNone;
  if (newest_ != kNone) next_[index(newest_)] = block;
  newest_ = block;
  if (oldest_ == kNone) oldest_ = block;
  ++n_evictable_;
}

void WindowPages::remove_evictable(BlockId block) {
  const BlockId before = prev_[index(block)];
  const BlockId after = next_[index(block)];
  (before != kNone ? next_[index(before)] : oldest_) = after;
  (after != kNone ? prev_[index(after)] : newest_) = before;
  prev_[index(block)] = next_[index(block)] = kNone;
  evictable_[index(block)] = 0;
  --n_evictable_;
}

Status WindowPages::check_invariants() const {
  std::vector<int> uses(static_cast<size_t>(n_total_), 0);
  for (int32_t page : free_pages_) ++uses[static_cast<size_t>(page)];
  int32_t n_listed = 0;
  for (BlockId b = oldest_; b != kNone; b = next_[index(b)]) {
    if (evictable_[index(b)] == 0 || holders(b) != 0 || !has_page(b))
      return Error{"window pages: block " + std::to_string(b) + " listed as evictable wrongly"};
    ++n_listed;
  }
  int32_t n_flagged = 0;
  for (BlockId b = 0; b < static_cast<BlockId>(holders_.size()); ++b) {
    n_flagged += evictable_[index(b)];
    const int32_t page = kv_.page_of(b);
    if (page >= 0) ++uses[static_cast<size_t>(page)];
    if (holders(b) < 0 || (holders(b) > 0 && page < 0))
      return Error{"window pages: block " + std::to_string(b) + " is held without a page"};
    if (page >= 0 && pool_.is_free(b))
      return Error{"window pages: free block " + std::to_string(b) + " keeps a page"};
    if (page >= 0 && holders(b) == 0 && evictable_[index(b)] == 0)
      return Error{"window pages: block " + std::to_string(b) + " keeps a page nobody holds"};
  }
  if (n_listed != n_evictable_ || n_flagged != n_evictable_)
    return Error{"window pages: the eviction list does not agree with its count"};
  for (int32_t page = 0; page < n_total_; ++page) {
    if (uses[static_cast<size_t>(page)] != 1)
      return Error{"window pages: page " + std::to_string(page) + " is in " +
                   std::to_string(uses[static_cast<size_t>(page)]) + " places"};
  }
  if (n_reserved_ < 0 || n_reserved_ > n_total_)
    return Error{"window pages: " + std::to_string(n_reserved_) + " pages reserved"};
  return {};
}

}  // namespace trellis
