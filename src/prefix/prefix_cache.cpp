#include "prefix/prefix_cache.h"

#include <algorithm>
#include <cassert>
#include <string>
#include <utility>

namespace trellis {

SequenceKv::SequenceKv(SequenceKv&& other) noexcept
    : cache_(std::exchange(other.cache_, nullptr)),
      ns_(std::move(other.ns_)),
      block_table_(std::move(other.block_table_)),
      lock_(std::move(other.lock_)),
      n_cached_tokens_(other.n_cached_tokens_),
      n_blocks_allocated_(other.n_blocks_allocated_),
      n_blocks_acquired_(other.n_blocks_acquired_) {
  other.block_table_.clear();
}

SequenceKv& SequenceKv::operator=(SequenceKv&& other) noexcept {
  if (this != &other) {
    reset();
    cache_ = std::exchange(other.cache_, nullptr);
    ns_ = std::move(other.ns_);
    block_table_ = std::move(other.block_table_);
    other.block_table_.clear();
    lock_ = std::move(other.lock_);
    n_cached_tokens_ = other.n_cached_tokens_;
    n_blocks_allocated_ = other.n_blocks_allocated_;
    n_blocks_acquired_ = other.n_blocks_acquired_;
  }
  return *this;
}

void SequenceKv::reset() {
  if (cache_ != nullptr) cache_->release(*this);
}

void SequenceKv::reserve_table(int32_t n_tokens) {
  if (cache_ == nullptr || n_tokens <= 0) return;
  const int32_t B = cache_->block_size();
  block_table_.reserve(static_cast<size_t>((n_tokens + B - 1) / B));
}

int32_t SequenceKv::capacity_tokens() const {
  return cache_ == nullptr ? 0 : static_cast<int32_t>(block_table_.size()) * cache_->block_size();
}

PrefixCache::PrefixCache(BlockPool& pool, KvStorage& kv, PrefixCacheConfig config)
    : pool_(pool),
      kv_(kv),
      config_(config),
      tree_(pool, RadixTreeConfig{kv.layout().block_size, config.mode}) {
  assert(kv.n_blocks() >= pool.n_total());
}

PrefixMatch PrefixCache::match(std::string_view ns, std::span<const TokenId> prompt) const {
  if (!config_.enabled || prompt.empty()) return {};
  return tree_.match_prefix(ns, prompt, static_cast<int32_t>(prompt.size()) - 1);
}

Status PrefixCache::make_free(int32_t n_blocks) {
  if (pool_.can_alloc(n_blocks)) return {};
  const int32_t evictable = tree_.count_evictable_blocks();
  if (pool_.n_free() + evictable < n_blocks) {
    return Error{"the KV cache is full: " + std::to_string(n_blocks) + " blocks needed, " +
                 std::to_string(pool_.n_free()) + " free and " + std::to_string(evictable) +
                 " evictable (pool of " + std::to_string(pool_.n_total()) + " blocks of " +
                 std::to_string(block_size()) + " tokens)"};
  }
  tree_.evict(n_blocks - pool_.n_free(), spill_);
  assert(pool_.can_alloc(n_blocks));
  return {};
}

Result<SequenceKv> PrefixCache::admit(std::string_view ns, const PrefixMatch& match,
                                      int32_t n_tokens) {
  assert(n_tokens > match.n_tokens);
  const int32_t n_fresh = blocks_needed(match, n_tokens);
  // Lock first: evicting to make room must not take the matched path (nor the partial block that
  // is about to be copied).
  PrefixLock lock = tree_.lock(match);
  TRELLIS_TRY(make_free(n_fresh));

  SequenceKv seq;
  seq.cache_ = this;
  seq.ns_ = std::string(ns);
  seq.block_table_.reserve(static_cast<size_t>(match.n_full_blocks + n_fresh));
  for (int32_t j = 0; j < match.n_full_blocks; ++j) {
    pool_.retain(match.blocks[static_cast<size_t>(j)]);
    seq.block_table_.push_back(match.blocks[static_cast<size_t>(j)]);
  }
  pool_.alloc(n_fresh, seq.block_table_);
  if (match.has_partial_block()) {
    // Copy-on-write: the cached block stays read-only; this request continues in its own copy.
    kv_.copy_block(match.partial_block(),
                   seq.block_table_[static_cast<size_t>(match.n_full_blocks)],
                   match.n_partial_slots);
  }
  seq.lock_ = std::move(lock);
  seq.n_cached_tokens_ = match.n_tokens;
  seq.n_blocks_acquired_ = match.n_full_blocks;
  seq.n_blocks_allocated_ = n_fresh;
  return seq;
}

Result<SequenceKv> PrefixCache::fork(const SequenceKv& parent, int32_t n_tokens) {
  assert(parent.cache_ == this && n_tokens <= parent.capacity_tokens());
  const int32_t n_full = n_tokens / block_size();
  const int32_t n_partial_slots = n_tokens % block_size();
  TRELLIS_TRY(make_free(n_partial_slots > 0 ? 1 : 0));
  SequenceKv child;
  child.cache_ = this;
  child.ns_ = parent.ns_;
  for (int32_t j = 0; j < n_full; ++j) {
    pool_.retain(parent.block_table_[static_cast<size_t>(j)]);
    child.block_table_.push_back(parent.block_table_[static_cast<size_t>(j)]);
  }
  if (n_partial_slots > 0) {
    pool_.alloc(1, child.block_table_);
    kv_.copy_block(parent.block_table_[static_cast<size_t>(n_full)], child.block_table_.back(),
                   n_partial_slots);
  }
  child.n_cached_tokens_ = n_tokens;
  child.n_blocks_acquired_ = n_full;
  child.n_blocks_allocated_ = n_partial_slots > 0 ? 1 : 0;
  return child;
}

Status PrefixCache::reserve(SequenceKv& seq, int32_t n_tokens) {
  assert(seq.cache_ == this);
  const int32_t B = block_size();
  const int32_t n_more = (n_tokens + B - 1) / B - static_cast<int32_t>(seq.block_table_.size());
  if (n_more <= 0) return {};
  TRELLIS_TRY(make_free(n_more));
  pool_.alloc(n_more, seq.block_table_);
  seq.n_blocks_allocated_ += n_more;
  return {};
}

void PrefixCache::trim(SequenceKv& seq, int32_t n_tokens) {
  assert(seq.cache_ == this);
  const int32_t B = block_size();
  const auto n_kept = static_cast<size_t>(std::max(0, (n_tokens + B - 1) / B));
  while (seq.block_table_.size() > n_kept) {
    pool_.release(seq.block_table_.back());
    seq.block_table_.pop_back();
  }
}

void PrefixCache::insert(const SequenceKv& seq, std::span<const TokenId> tokens, bool finished) {
  assert(seq.cache_ == this);
  assert(static_cast<int64_t>(tokens.size()) <= seq.capacity_tokens());
  if (!config_.enabled) return;
  const int32_t B = block_size();
  auto n_tokens = static_cast<int32_t>(tokens.size());
  if (!finished) n_tokens = n_tokens / B * B;  // the block being written must stay private
  if (n_tokens == 0) return;
  const auto n_blocks = static_cast<size_t>((n_tokens + B - 1) / B);
  tree_.insert(seq.ns_, tokens.first(static_cast<size_t>(n_tokens)),
               std::span<const BlockId>(seq.block_table_).first(n_blocks));
}

bool PrefixCache::hold_for_restore(std::span<const BlockId> shared, int32_t n_fresh,
                                   std::vector<BlockId>& table) {
  table.clear();
  if (!config_.enabled || n_fresh <= 0) return false;
  // A request reference on each shared block keeps its node from being evicted below.
  table.assign(shared.begin(), shared.end());
  for (BlockId b : table) pool_.retain(b);
  if (!make_free(n_fresh).ok()) {
    release_restore(table);
    return false;
  }
  pool_.alloc(n_fresh, table);
  return true;
}

int32_t PrefixCache::install_restored(std::string_view ns, std::span<const TokenId> tokens,
                                      std::span<const BlockId> table, int32_t n_shared) {
  const InsertResult inserted = tree_.insert(ns, tokens, table);
  return std::min(inserted.n_taken, static_cast<int32_t>(table.size()) - n_shared);
}

void PrefixCache::release_restore(std::vector<BlockId>& table) {
  pool_.release_all(table);  // the tree keeps its own references; the rest go back
  table.clear();
}

void PrefixCache::release(SequenceKv& seq) {
  pool_.release_all(seq.block_table_);
  seq.block_table_.clear();
  seq.lock_.reset();
  seq.cache_ = nullptr;
}

}  // namespace trellis
