// The glue between a request and the KV blocks it reads and writes: the pool (references), the
// radix tree (shared prefixes) and the KV storage (copy-on-write of a partially matched block).
// Every request's blocks are obtained, grown, cached and released through this class, so the
// lifecycle documented in prefix/radix_tree.h lives in one place:
//
//   PrefixMatch m = cache.match(ns, prompt);           // prepare: no side effects
//   Result<SequenceKv> seq = cache.admit(ns, m, n);     // commit: lock, share, allocate, copy
//   ... prefill prompt[m.n_tokens ..) into seq->block_table() ...
//   cache.insert(*seq, prompt, /*finished=*/false);     // whole blocks of the prompt
//   ... decode: cache.reserve(*seq, kv_len + 1) before writing position kv_len ...
//   cache.insert(*seq, tokens_with_kv, /*finished=*/true);
//   seq = {};                                           // releases every block (RAII)
//
// A request's block table holds one request reference on each of its blocks:
//
//   block index   0 .. n_full_blocks-1         | n_full_blocks ...
//                 shared: retained, read-only  | fresh: allocated, written by this request
//                                              | (the first one starts as a copy of the
//                                              |  matched partial block in TOKEN mode)
//
// Sliding-window layers (WindowPolicy): their KV lives in window pages (kv/window_pages.h). A
// request holds the pages of the blocks its next step's window reaches (prepare_window before each
// step) and lets go of older ones; a match is only as long as the cache still has the pages of
// the window before its end (a shorter match otherwise).
//
// With the cache disabled match() finds nothing and insert() caches nothing: every block is fresh
// and freed when the request ends, which is the baseline the cache is compared against.
//
// Not thread-safe: one owner (the engine loop).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "kv/block_pool.h"
#include "kv/kv_storage.h"
#include "kv/window_pages.h"
#include "prefix/radix_tree.h"

namespace trellis {

struct PrefixCacheConfig {
  bool enabled = true;  // off: no sharing, nothing cached
  MatchMode mode = MatchMode::TOKEN;
};

// Layers with a sliding window whose KV is kept for the window only.
struct WindowPolicy {
  WindowPages* pages = nullptr;  // null: no such layers (every block keeps every layer)
  int32_t n_swa = 0;             // a query at position p reads positions (p - n_swa, p]
  int32_t max_step_tokens = 1;   // the most positions one step computes for one sequence
};

class PrefixCache;

// One request's hold on KV blocks: its block table and the lock on its matched prefix. Move-only;
// destroying it (or reset()) releases every block reference and unlocks. Precondition: destroyed
// before its PrefixCache.
class SequenceKv {
 public:
  SequenceKv() = default;
  ~SequenceKv() { reset(); }
  SequenceKv(SequenceKv&& other) noexcept;
  SequenceKv& operator=(SequenceKv&& other) noexcept;
  SequenceKv(const SequenceKv&) = delete;
  SequenceKv& operator=(const SequenceKv&) = delete;

  // Releases the blocks and the lock now (no-op when empty).
  void reset();
  // Sizes the block table's memory for n_tokens positions, so that growing it that far (reserve)
  // allocates no memory. Takes no block. No-op when empty or n_tokens <= 0.
  void reserve_table(int32_t n_tokens);

  // blocks()[j] holds token positions [j * B, (j + 1) * B).
  const std::vector<BlockId>& block_table() const { return block_table_; }
  // Token positions the table covers: block_table().size() * B.
  int32_t capacity_tokens() const;
  // Prompt tokens whose KV came from the cache (the match length).
  int32_t n_cached_tokens() const { return n_cached_tokens_; }
  // Blocks whose window pages this request holds: [window_begin(), window_end()).
  int32_t window_begin() const { return window_begin_; }
  int32_t window_end() const { return window_end_; }
  // Blocks this request allocated fresh (copies of a partial block included) and blocks it
  // shared from the cache.
  int32_t n_blocks_allocated() const { return n_blocks_allocated_; }
  int32_t n_blocks_acquired() const { return n_blocks_acquired_; }

 private:
  friend class PrefixCache;

  PrefixCache* cache_ = nullptr;
  std::string ns_;
  std::vector<BlockId> block_table_;
  PrefixLock lock_;
  int32_t n_cached_tokens_ = 0;
  int32_t n_blocks_allocated_ = 0;
  int32_t n_blocks_acquired_ = 0;
  int32_t window_begin_ = 0;
  int32_t window_end_ = 0;
  int32_t page_quota_ = 0;  // window pages reserved for it
};

class PrefixCache {
 public:
  // Preconditions: pool, kv and window.pages outlive the cache; kv has at least pool.n_total()
  // blocks; window.pages are kv's.
  PrefixCache(BlockPool& pool, KvStorage& kv, PrefixCacheConfig config, WindowPolicy window = {});
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The most window pages one sequence holds at once: the window before a step's first position,
  // the step's own positions, and the source of a partial block's copy while it is copied.
  static int32_t page_quota(int32_t block_size, const WindowPolicy& window) {
    return (window.n_swa - 1 + window.max_step_tokens + block_size - 1) / block_size + 2;
  }

  const PrefixCacheConfig& config() const { return config_; }
  int32_t block_size() const { return tree_.block_size(); }

  // The longest cached prefix of `prompt` in namespace `ns`, capped at prompt.size() - 1 so the
  // last prompt token is always computed (its logits are needed), and with windowed layers to a
  // length whose window's pages are all there. Empty when disabled. No side effects; valid until
  // the next admit/reserve/prepare_window (which may evict).
  PrefixMatch match(std::string_view ns, std::span<const TokenId> prompt) const;

  // Blocks admit(match, n_tokens) takes from the free list (after evicting).
  int32_t blocks_needed(const PrefixMatch& match, int32_t n_tokens) const {
    return tree_.fresh_blocks_needed(match, n_tokens);
  }

  // Commits `match` (from match() on this cache, with nothing evicted since) for a request that
  // will write positions up to n_tokens: locks the matched path, shares its whole blocks,
  // allocates the rest (evicting unlocked cache leaves as needed) and copies the matched partial
  // block. Errors, with nothing changed, when the pool cannot supply the blocks even after
  // evicting everything evictable. Precondition: n_tokens > match.n_tokens.
  Result<SequenceKv> admit(std::string_view ns, const PrefixMatch& match, int32_t n_tokens);

  // A new sequence that continues from the first n_tokens positions of `parent` (parallel
  // samples of one prompt): it shares the parent's whole blocks (refcount + 1, no copy) and copies
  // the partially filled block, if any, since both will write into their own. Errors, with
  // nothing changed, when no block can be had for that copy.
  // Precondition: parent covers n_tokens positions whose KV is written.
  Result<SequenceKv> fork(const SequenceKv& parent, int32_t n_tokens);

  // Grows seq's table to cover n_tokens positions, evicting cache leaves as needed. Errors, with
  // nothing changed, when the pool cannot supply the blocks.
  Status reserve(SequenceKv& seq, int32_t n_tokens);

  // Before a step computes positions [begin, end) of seq (covered by its table): with windowed
  // layers, seq lets go of the pages before the window of position `begin` and holds those from
  // there to `end`. Never fails: admission reserved the pages. No-op without windowed layers.
  // Precondition: end - begin <= the policy's max_step_tokens.
  void prepare_window(SequenceKv& seq, int32_t begin, int32_t end);
  const WindowPolicy& window() const { return window_; }

  // Shrinks seq's table to the blocks that cover n_tokens positions, releasing the ones after
  // them (speculative decoding wrote rejected guesses there; nothing was cached from them).
  void trim(SequenceKv& seq, int32_t n_tokens);

  // Caches `tokens` (positions [0, tokens.size()), whose KV is written in seq's blocks) in seq's
  // namespace. While the request still writes (finished = false) only whole blocks are cached,
  // since a cached block is read-only; at its end (finished = true) a partial last block is cached
  // too in TOKEN mode. No-op when disabled. Precondition: seq covers tokens.size() positions.
  void insert(const SequenceKv& seq, std::span<const TokenId> tokens, bool finished);

  // Evicts everything evictable (blocks held by running requests stay), telling the spill
  // observer (if any) about every evicted node. Returns blocks freed.
  int32_t flush() { return tree_.flush(spill_); }
  // Evicts everything evictable without telling the spill observer: for KV that must not be kept
  // anywhere (a failed step may have written it).
  int32_t discard() { return tree_.flush(); }

  // Called with every node evicted to make room or by flush(), while its blocks' KV is still
  // intact (nothing is allocated during the call): the place to save them elsewhere (a disk
  // tier). Must not call back into the cache.
  void set_spill_observer(EvictObserver observer) { spill_ = std::move(observer); }

  // KV restored from elsewhere (a disk tier) is cached in three steps: hold_for_restore, then
  // writing the K/V into the fresh blocks (on any thread: nothing else touches them), then
  // install_restored and release_restore.
  //
  // Holds a reference on each of `shared` (the cached blocks of the prefix before the restored
  // part, from match()), so that they stay cached, and allocates n_fresh blocks after them,
  // evicting as needed: `table` becomes shared + fresh. False, with nothing held and `table`
  // empty, when disabled or when the pool cannot supply the blocks even after evicting.
  bool hold_for_restore(std::span<const BlockId> shared, int32_t n_fresh,
                        std::vector<BlockId>& table);
  // Caches `tokens` of namespace `ns` over `table` (ceil(size / B) blocks from hold_for_restore,
  // the last one partial when size % B != 0; the first n_shared are the shared ones). Returns
  // how many of the fresh blocks the tree took (it skips positions it already has, and in BLOCK
  // match mode a partial block). The caller's references stay: release_restore drops them.
  int32_t install_restored(std::string_view ns, std::span<const TokenId> tokens,
                           std::span<const BlockId> table, int32_t n_shared);
  // Drops the references hold_for_restore took (blocks the tree did not take become free).
  void release_restore(std::vector<BlockId>& table);

  const BlockPool& pool() const { return pool_; }
  const RadixTree& tree() const { return tree_; }
  // The pool's, the tree's and the window pages' invariants; with no request running, no page is
  // held or reserved.
  Status check_invariants() const;

 private:
  friend class SequenceKv;
  // Makes at least n_blocks blocks free by evicting, or errors with nothing evicted when even
  // evicting everything evictable would not suffice.
  Status make_free(int32_t n_blocks);
  void release(SequenceKv& seq);
  bool windowed() const { return window_.pages != nullptr; }
  // The first position a query at position p reads in a windowed layer.
  int32_t window_start(int32_t p) const { return std::max(0, p - window_.n_swa + 1); }
  // The longest length <= match.n_tokens whose window's blocks in `match` all have pages.
  int32_t usable_length(const PrefixMatch& match) const;
  // Reserves seq's window pages (with windowed layers) and makes n_blocks blocks free; errors,
  // with nothing reserved, when either cannot be had.
  Status make_room(SequenceKv& seq, int32_t n_blocks);
  // seq holds the pages of its blocks [window_start(n_tokens) / B, ceil(n_tokens / B)): the window
  // of a sequence whose first n_tokens positions are written (or shared).
  void hold_window_of(SequenceKv& seq, int32_t n_tokens);
  void let_go_window(SequenceKv& seq);

  BlockPool& pool_;
  KvStorage& kv_;
  PrefixCacheConfig config_;
  WindowPolicy window_;
  int32_t page_quota_ = 0;  // the most pages a sequence holds at once (window + one step + copy)
  RadixTree tree_;
  EvictObserver spill_;
};

}  // namespace trellis
