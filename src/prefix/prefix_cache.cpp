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
      n_blocks_acquired_(other.n_blocks_acquired_),
      window_begin_(other.window_begin_),
      window_end_(other.window_end_),
      page_quota_(std::exchange(other.page_quota_, 0)) {
  other.block_table_.clear();
  other.window_begin_ = other.window_end_ = 0;
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
    window_begin_ = std::exchange(other.window_begin_, 0);
    window_end_ = std::exchange(other.window_end_, 0);
    page_quota_ = std::exchange(other.page_quota_, 0);
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

PrefixCache::PrefixCache(BlockPool& pool, KvStorage& kv, PrefixCacheConfig config,
                         WindowPolicy window)
    : pool_(pool),
      kv_(kv),
      config_(config),
      window_(window),
      tree_(pool, RadixTreeConfig{kv.layout().block_size, config.mode}) {
  assert(kv.n_blocks() >= pool.n_total());
  assert(!windowed() || (window.n_swa > 0 && window.max_step_tokens > 0));
  if (windowed()) page_quota_ = page_quota(block_size(), window);
}

PrefixMatch PrefixCache::match(std::string_view ns, std::span<const TokenId> prompt) const {
  if (!config_.enabled || prompt.empty()) return {};
  PrefixMatch m = tree_.match_prefix(ns, prompt, static_cast<int32_t>(prompt.size()) - 1);
  if (!windowed()) return m;
  // A shorter match may end in another block version (a parent's tail): check it again.
  for (int32_t n = usable_length(m); n < m.n_tokens; n = usable_length(m))
    m = tree_.match_prefix(ns, prompt, n);
  return m;
}

int32_t PrefixCache::usable_length(const PrefixMatch& match) const {
  const int32_t B = block_size();
  int32_t n = match.n_tokens;
  while (n > 0) {
    int32_t missing = -1;
    for (int32_t j = (n - 1) / B; j >= window_start(n) / B && missing < 0; --j)
      if (!window_.pages->has_page(match.blocks[static_cast<size_t>(j)])) missing = j;
    if (missing < 0) return n;
    n = missing * B;  // every longer length's window reaches block `missing`
  }
  return 0;
}

Status PrefixCache::make_room(SequenceKv& seq, int32_t n_blocks) {
  if (windowed()) {
    if (!window_.pages->try_reserve(page_quota_)) {
      return Error{"the KV window pages are all reserved: " + std::to_string(page_quota_) +
                   " needed, " + std::to_string(window_.pages->n_reserved()) + " of " +
                   std::to_string(window_.pages->n_total()) + " reserved by running requests"};
    }
    seq.page_quota_ = page_quota_;
  }
  if (Status room = make_free(n_blocks); !room.ok()) {
    if (windowed()) window_.pages->unreserve(std::exchange(seq.page_quota_, 0));
    return room.error();
  }
  return {};
}

void PrefixCache::hold_window_of(SequenceKv& seq, int32_t n_tokens) {
  if (!windowed()) return;
  const int32_t B = block_size();
  seq.window_begin_ = seq.window_end_ = window_start(n_tokens) / B;
  // Written or shared blocks must still have their pages: match() and fork() see to it.
  for (int32_t j = seq.window_begin_; j < n_tokens / B; ++j)
    assert(window_.pages->has_page(seq.block_table_[static_cast<size_t>(j)]));
  prepare_window(seq, n_tokens, n_tokens);
}

void PrefixCache::prepare_window(SequenceKv& seq, int32_t begin, int32_t end) {
  if (!windowed()) return;
  assert(seq.cache_ == this && begin <= end && end - begin <= window_.max_step_tokens);
  assert(end <= seq.capacity_tokens());
  const int32_t B = block_size();
  const int32_t first = window_start(begin) / B;
  while (seq.window_begin_ < first && seq.window_begin_ < seq.window_end_)
    window_.pages->let_go(seq.block_table_[static_cast<size_t>(seq.window_begin_++)]);
  if (seq.window_begin_ == seq.window_end_)
    seq.window_begin_ = seq.window_end_ = std::max(seq.window_begin_, first);
  for (const int32_t last = (end + B - 1) / B; seq.window_end_ < last; ++seq.window_end_)
    window_.pages->hold(seq.block_table_[static_cast<size_t>(seq.window_end_)]);
}

void PrefixCache::let_go_window(SequenceKv& seq) {
  if (!windowed()) return;
  while (seq.window_end_ > seq.window_begin_)
    window_.pages->let_go(seq.block_table_[static_cast<size_t>(--seq.window_end_)]);
  window_.pages->unreserve(seq.page_quota_);
  seq.page_quota_ = 0;
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
  SequenceKv seq;
  TRELLIS_TRY(make_room(seq, n_fresh));

  seq.cache_ = this;
  seq.ns_ = std::string(ns);
  seq.block_table_.reserve(static_cast<size_t>(match.n_full_blocks + n_fresh));
  for (int32_t j = 0; j < match.n_full_blocks; ++j) {
    pool_.retain(match.blocks[static_cast<size_t>(j)]);
    seq.block_table_.push_back(match.blocks[static_cast<size_t>(j)]);
  }
  pool_.alloc(n_fresh, seq.block_table_);
  // Held while the copy's page is attached, which may evict an evictable page.
  if (match.has_partial_block() && windowed()) window_.pages->hold(match.partial_block());
  hold_window_of(seq, match.n_tokens);
  if (match.has_partial_block()) {
    // Copy-on-write: the cached block stays read-only; this request continues in its own copy.
    kv_.copy_block(match.partial_block(),
                   seq.block_table_[static_cast<size_t>(match.n_full_blocks)],
                   match.n_partial_slots);
    if (windowed()) window_.pages->let_go(match.partial_block());
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
  SequenceKv child;
  TRELLIS_TRY(make_room(child, n_partial_slots > 0 ? 1 : 0));
  child.cache_ = this;
  child.ns_ = parent.ns_;
  for (int32_t j = 0; j < n_full; ++j) {
    pool_.retain(parent.block_table_[static_cast<size_t>(j)]);
    child.block_table_.push_back(parent.block_table_[static_cast<size_t>(j)]);
  }
  if (n_partial_slots > 0) pool_.alloc(1, child.block_table_);
  hold_window_of(child, n_tokens);  // the parent holds the same window, pages included
  if (n_partial_slots > 0) {
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
  while (windowed() && seq.window_end_ > std::max(seq.window_begin_, static_cast<int32_t>(n_kept)))
    window_.pages->let_go(seq.block_table_[static_cast<size_t>(--seq.window_end_)]);
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
  // Restored blocks would need window pages: the disk tier keeps whole blocks only.
  if (!config_.enabled || n_fresh <= 0 || windowed()) return false;
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

Status PrefixCache::check_invariants() const {
  TRELLIS_TRY(tree_.check_invariants());
  if (!windowed()) return {};
  TRELLIS_TRY(window_.pages->check_invariants());
  if (pool_.n_in_use() == 0 && (window_.pages->n_held() != 0 || window_.pages->n_reserved() != 0)) {
    return Error{"window pages: " + std::to_string(window_.pages->n_held()) + " held and " +
                 std::to_string(window_.pages->n_reserved()) + " reserved with no request running"};
  }
  return {};
}

void PrefixCache::release(SequenceKv& seq) {
  let_go_window(seq);
  pool_.release_all(seq.block_table_);
  seq.block_table_.clear();
  seq.lock_.reset();
  seq.cache_ = nullptr;
}

}  // namespace trellis
