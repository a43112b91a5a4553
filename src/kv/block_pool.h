// The one owner of KV block bookkeeping: reference counts and the free list.
//
// Holders of a block are the prefix cache (the radix tree) and the block tables of running
// requests. The tree's references are counted separately ("tree refs") so that the pool can tell
// which blocks are merely cached:
//
//   refcount(b) = tree_refs(b) + (number of request references on b)
//
//   state         refcount        tree_refs   meaning
//   free          0               0           on the free list, handed out by alloc()
//   cached-only   == tree_refs    >= 1        only the tree holds it: evictable
//   in use        > tree_refs     any         at least one request reads or writes it
//
// so n_free() + n_cached_only() + n_in_use() == n_total() at every step. A block is normally
// indexed by one tree slot; the tree may index the same block twice when a node is split inside
// a block (see prefix/radix_tree.h), hence a count rather than a flag.
//
// Only this class changes refcounts or the free list. Every operation is O(1) (alloc: O(n)).
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace trellis {

using BlockId = int32_t;

class BlockPool {
 public:
  // A pool of n_blocks blocks, all free. Precondition: n_blocks >= 0.
  explicit BlockPool(int32_t n_blocks);

  // --- State counts (O(1), readable at any time). -------------------------------------------
  int32_t n_total() const { return static_cast<int32_t>(refcounts_.size()); }
  int32_t n_free() const { return static_cast<int32_t>(free_list_.size()); }
  // Not free: cached-only or in use.
  int32_t n_used() const { return n_total() - n_free(); }
  // Indexed by the tree (whether or not a request also holds them).
  int32_t n_cached() const { return n_cached_; }
  // Held by the tree alone.
  int32_t n_cached_only() const { return n_used() - n_in_use_; }
  // Held by at least one request.
  int32_t n_in_use() const { return n_in_use_; }
  int32_t peak_used() const { return peak_used_; }
  int32_t peak_in_use() const { return peak_in_use_; }

  // --- Cumulative counters since construction. ------------------------------------------------
  int64_t n_allocated() const { return n_allocated_; }  // blocks handed out by alloc()
  int64_t n_acquired() const { return n_acquired_; }    // retain() calls
  int64_t n_evicted() const { return n_evicted_; }      // blocks freed by cache_release()

  // --- Request references. --------------------------------------------------------------------
  bool can_alloc(int32_t n) const { return n >= 0 && n <= n_free(); }
  // Appends n free blocks to `out`, each with refcount 1 (one request reference).
  // Precondition: can_alloc(n). Lowest ids come first on a fresh pool; released blocks are
  // reused most recently freed first.
  void alloc(int32_t n, std::vector<BlockId>& out);
  // Acquires another request reference on a block someone holds. Precondition: refcount(id) > 0.
  void retain(BlockId id);
  // Drops one request reference; the block returns to the free list when no holder is left.
  // Precondition: refcount(id) > tree_refs(id) (a request reference exists).
  void release(BlockId id);
  void release_all(const std::vector<BlockId>& ids);

  // --- Tree references (called only by the prefix cache). -------------------------------------
  // The tree indexes `id` in one more slot. Precondition: refcount(id) > 0 (the caller hands over
  // a block it holds).
  void cache_retain(BlockId id);
  // The tree drops one slot on `id`. Returns true when this freed the block (then counted as
  // evicted). Precondition: tree_refs(id) > 0.
  bool cache_release(BlockId id);
  // The tree indexes `to` instead of `from` in one slot, both holding the same KV: `from` is freed
  // when no holder is left, which drops a duplicate and is not counted as an eviction.
  // Preconditions: tree_refs(from) > 0, refcount(to) > 0.
  void cache_swap(BlockId from, BlockId to);

  int32_t refcount(BlockId id) const { return refcounts_[index(id)]; }
  int32_t tree_refs(BlockId id) const { return tree_refs_[index(id)]; }
  // Request references only.
  int32_t request_refs(BlockId id) const { return refcount(id) - tree_refs(id); }
  bool is_free(BlockId id) const { return refcount(id) == 0; }
  // How many times alloc() has handed `id` out: what a block holds is only known for the
  // generation it was written in (a draft model's KV, spec/draft_model.h, is tracked this way).
  uint32_t generation(BlockId id) const { return generations_[index(id)]; }

  // Told of every block that goes back to the free list, after it went (the window pages, kv/
  // window_pages.h, give up what they kept for it). Must not call back into the pool.
  void set_free_listener(std::function<void(BlockId)> listener) { on_free_ = std::move(listener); }

  // Free blocks appear on the free list exactly once with refcount 0; held blocks have
  // refcount > 0 and 0 <= tree_refs <= refcount; the state counts agree with a recount and
  // free + cached-only + in-use == total. O(n_total).
  Status check_invariants() const;

 private:
  static size_t index(BlockId id) { return static_cast<size_t>(id); }
  // Drops one tree reference; returns true when that freed the block.
  bool drop_tree_ref(BlockId id);
  // Moves the state counts from the block's state before a change to its state after it.
  void account(BlockId id, int32_t old_refcount, int32_t old_tree_refs);
  void push_free(BlockId id);

  std::vector<int32_t> refcounts_;
  std::vector<int32_t> tree_refs_;
  std::vector<uint32_t> generations_;
  std::vector<BlockId> free_list_;  // a stack: back() is handed out next
  std::function<void(BlockId)> on_free_;
  int32_t n_cached_ = 0;
  int32_t n_in_use_ = 0;
  int32_t peak_used_ = 0;
  int32_t peak_in_use_ = 0;
  int64_t n_allocated_ = 0;
  int64_t n_acquired_ = 0;
  int64_t n_evicted_ = 0;
};

// --- Sizing the pool. -------------------------------------------------------------------------

// Parses a memory size: a whole number of bytes with an optional binary suffix B, KiB, MiB or
// GiB ("1000000", "64KiB", "512MiB", "2GiB"). Rejects empty input, signs, fractions, spaces,
// unknown suffixes (including the ambiguous "KB"/"MB"/"GB") and values above 2^62 bytes.
Result<int64_t> parse_byte_size(std::string_view text);

// How many whole blocks of `bytes_per_block` bytes fit in `budget_bytes`. Errors when not even
// one block fits or the count exceeds INT32_MAX. Precondition: bytes_per_block > 0.
Result<int32_t> blocks_for_bytes(int64_t budget_bytes, int64_t bytes_per_block);

// Blocks needed to hold `n_tokens` token positions: ceil(n_tokens / block_size). Errors for a
// non-positive token count or a count above INT32_MAX blocks. Precondition: block_size > 0.
Result<int32_t> blocks_for_tokens(int64_t n_tokens, int32_t block_size);

}  // namespace trellis
