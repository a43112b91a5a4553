// Who holds the window pages of a KvStorage (kv/kv_storage.h): the KV of sliding-window layers,
// one page per block at most, kept only while something may still read it.
//
// A layer with a window of W positions reads, for a query at position p, positions
// (p - W, p] only. So a request holds the pages of the blocks its next step's window reaches and
// lets go of the older ones as it advances; a page nobody holds is
//
//   - freed at once when the prefix cache does not index its block (no later request can reach
//     it), or
//   - kept, evictable, when the cache does: a later request whose match ends within a window of
//     it needs it (prefix/prefix_cache.h checks that the whole window is there). Evictable pages
//     are taken back least recently released first when a page is needed, so the last windows of
//     the most recent prefixes stay longest.
//
//   page state   holders   block indexed by the tree   on
//   free         0         -                           the free list
//   held         >= 1      any                         -
//   evictable    0         yes (when it became so)     the eviction list
//
// A block that goes free takes its page with it (BlockPool's free listener).
//
// Admission: each running request reserves the most pages it can hold at once (its quota); as
// long as the reservations add up to no more than the pages there are, a held page beyond them
// cannot be needed, so hold() always finds a free or evictable page.
//
// Not thread-safe: one owner (the engine loop), between forward passes.
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "kv/block_pool.h"
#include "kv/kv_storage.h"

namespace trellis {

class WindowPages {
 public:
  // Pages of `kv` (kv.n_pages() of them) for blocks of `pool`. Registers itself as the pool's free
  // listener. Preconditions: kv and pool outlive this; kv has a page slot per block of the pool.
  WindowPages(KvStorage& kv, BlockPool& pool);
  ~WindowPages() { pool_.set_free_listener({}); }
  WindowPages(const WindowPages&) = delete;
  WindowPages& operator=(const WindowPages&) = delete;

  int32_t n_total() const { return n_total_; }
  int32_t n_free() const { return static_cast<int32_t>(free_pages_.size()); }
  int32_t n_evictable() const { return n_evictable_; }
  int32_t n_held() const { return n_total() - n_free() - n_evictable(); }
  int32_t peak_held() const { return peak_held_; }
  int64_t n_evicted() const { return n_evicted_; }

  bool has_page(BlockId block) const { return kv_.page_of(block) >= 0; }
  int32_t holders(BlockId block) const { return holders_[index(block)]; }

  // --- Reservations (admission). -----------------------------------------------------------
  // Reserves n pages for a request; false (nothing reserved) when that would promise more pages
  // than there are.
  bool try_reserve(int32_t n);
  void unreserve(int32_t n);
  int32_t n_reserved() const { return n_reserved_; }

  // --- Holding. -----------------------------------------------------------------------------
  // A request holds `block`'s page: one more holder when it has one, else a free page is
  // attached (evicting the least recently released evictable page when none is free).
  // Precondition: the holder's reservation covers it (see above). The new page's content is
  // undefined until written.
  void hold(BlockId block);
  // A holder lets go; with no holder left the page becomes evictable or free (see above).
  void let_go(BlockId block);

  // Every count agrees with a recount, every page is in exactly one state. O(blocks + pages).
  Status check_invariants() const;

 private:
  static size_t index(BlockId id) { return static_cast<size_t>(id); }
  void block_freed(BlockId block);
  void free_page_of(BlockId block);
  // The eviction list: blocks whose page is evictable, least recently released first.
  void push_evictable(BlockId block);
  void remove_evictable(BlockId block);

  KvStorage& kv_;
  BlockPool& pool_;
  int32_t n_total_ = 0;
  std::vector<int32_t> free_pages_;  // a stack
  std::vector<int32_t> holders_;     // per block
  static constexpr BlockId kNone = -1;
  std::vector<BlockId> prev_;  // per block, the eviction list's links
  std::vector<BlockId> next_;
  std::vector<uint8_t> evictable_;  // per block
  BlockId oldest_ = kNone;
  BlockId newest_ = kNone;
  int32_t n_evictable_ = 0;
  int32_t n_reserved_ = 0;
  int32_t peak_held_ = 0;
  int64_t n_evicted_ = 0;
};

}  // namespace trellis
