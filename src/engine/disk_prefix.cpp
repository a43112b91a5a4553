#include "engine/disk_prefix.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <utility>

namespace trellis {

Result<std::unique_ptr<DiskPrefixTier>> DiskPrefixTier::open(const DiskPrefixConfig& config,
                                                             const KvLayout& layout) {
  // The model's hash, remembered in the cache dir (hashing gigabytes at every start would cost
  // seconds). The directory must exist for the memo: DiskTier::open creates it too.
  Result<DirLock> probe = DirLock::acquire(config.dir);  // also refuses a dir in use, early
  if (!probe.ok()) return probe.error();
  Result<std::string> sha =
      remembered_file_sha256(config.model_path, config.dir + "/model-digests");
  probe = DirLock();  // released: DiskTier::open takes it again
  if (!sha.ok()) return sha.error();
  DiskTierConfig tc;
  tc.dir = config.dir;
  tc.budget_bytes = config.budget_bytes;
  tc.identity.model_sha256 = *sha;
  tc.identity.architecture = config.architecture;
  tc.identity.kv_type = kv_types_name(layout.types);
  tc.identity.block_size = layout.block_size;
  tc.identity.block_bytes = layout.bytes_per_block();
  tc.log = config.log;
  Result<std::unique_ptr<DiskTier>> tier = DiskTier::open(std::move(tc));
  if (!tier.ok()) return tier.error();
  std::unique_ptr<DiskPrefixTier> d(new DiskPrefixTier());
  d->tier_ = std::move(tier).value();
  d->block_size_ = layout.block_size;
  d->max_held_blocks_ = config.max_held_blocks;
  d->loader_ = std::thread([p = d.get()] { p->loader_loop(); });
  return d;
}

DiskPrefixTier::~DiskPrefixTier() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (loader_.joinable()) loader_.join();
}

void DiskPrefixTier::loader_loop() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, with every job run
      job = std::move(jobs_.front());
      jobs_.pop_front();
      ++n_jobs_running_;
    }
    job();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --n_jobs_running_;
    }
    changed_.notify_all();
  }
}

void DiskPrefixTier::wait_loads() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return jobs_.empty() && n_jobs_running_ == 0; });
}

void DiskPrefixTier::load_async(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  changed_.notify_all();
}

//   B = 4, node [start 6, end 14):   0 1 2 3 | 4 5 6 7 | 8 9 10 11 | 12 13
//   full blocks of the node: j = 1 (6 / 4) and j = 2; block 1 also holds the parent's 4 and 5,
//   copied there, so it is complete; the tail (j = 3, slots 12-13) is saved as a partial block of
//   2 tokens. A child of the node, evicted before it, may have written slots 14-15 of that same
//   block: the record keeps them, but its key and token count say that only 12-13 are valid.
void DiskPrefixTier::spill(const EvictedNode& node, const KvStorage& kv) {
  const int32_t B = block_size_;
  const auto end = static_cast<int32_t>(node.path.size());
  const int32_t first = node.start / B;
  const int32_t n_full = end / B - first;
  const NamespaceDigest ns = namespace_digest(node.ns);
  const std::vector<BlockKey> keys = chain_block_keys(ns, node.path, B, end / B);
  auto save = [&](int32_t j, const BlockKey& key, int32_t n_tokens, BlockId block) {
    if (tier_->contains(key)) return;
    BlockRecord r;
    r.key = key;
    r.parent = j == 0 ? kRootBlockKey : keys[static_cast<size_t>(j - 1)];
    r.ns = ns;
    const auto from = node.path.begin() + static_cast<std::ptrdiff_t>(j) * B;
    r.tokens.assign(from, from + n_tokens);
    const uint8_t* data = kv.block_data(block);
    r.kv.assign(data, data + kv.layout().bytes_per_block());
    tier_->write_async(std::move(r));
  };
  for (int32_t i = 0; i < n_full; ++i) {
    const int32_t j = first + i;
    save(j, keys[static_cast<size_t>(j)], B, node.blocks[static_cast<size_t>(i)]);
  }
  const int32_t n_tail = end % B;
  if (n_tail > 0 && std::ssize(node.blocks) > n_full) {
    const int32_t j = end / B;
    const BlockKey parent = j == 0 ? kRootBlockKey : keys[static_cast<size_t>(j - 1)];
    const std::span<const TokenId> tail = node.path.subspan(static_cast<size_t>(j) * B);
    save(j, chain_block_key(parent, ns, tail), n_tail, node.blocks[static_cast<size_t>(n_full)]);
  }
}

bool DiskPrefixTier::start_load(PrefixCache& cache, KvStorage& kv, const Sequence& seq,
                                DiskLoad& load, std::function<void()> done) {
  if (seq.wants_prompt_logits) return false;
  const std::span<const TokenId> prompt =
      std::span<const TokenId>(seq.tokens).first(static_cast<size_t>(seq.n_prompt));
  const PrefixMatch match = cache.match(seq.cache_namespace, prompt);
  if (!plan(cache, seq.cache_namespace, prompt, match, load)) return false;
  load_async([this, &seq, &kv, &load, prompt, done = std::move(done)] {
    if (!reads_cancelled_) read(seq.cache_namespace, prompt, kv, load);
    done();
  });
  return true;
}

int32_t DiskPrefixTier::finish_load(PrefixCache& cache, KvStorage& kv, const Sequence& seq,
                                    DiskLoad& load) {
  if (load.n_planned == 0) return 0;
  const double ms = load.ms;
  ++counters_.n_loads;
  if (load.n_held == 0) ++counters_.n_loads_staged;
  const std::span<const TokenId> prompt =
      std::span<const TokenId>(seq.tokens).first(static_cast<size_t>(seq.n_prompt));
  const int32_t n_tokens = install(cache, kv, seq.cache_namespace, prompt, load);
  counters_.n_hit_tokens += n_tokens;
  counters_.load_ms += ms;
  return n_tokens;
}

int32_t DiskPrefixTier::max_tokens(std::span<const TokenId> prompt) const {
  return prompt.empty() ? 0 : static_cast<int32_t>(prompt.size()) - 1;
}

int32_t DiskPrefixTier::first_block_to_load(const NamespaceDigest& ns,
                                            std::span<const TokenId> prompt,
                                            const PrefixMatch& match) const {
  const int32_t B = block_size_;
  const int32_t first = match.n_tokens / B;
  const int32_t cap = max_tokens(prompt);
  if (first * B >= cap) return -1;
  const bool whole_fits = (first + 1) * B <= cap;
  const std::vector<BlockKey> keys =
      chain_block_keys(ns, prompt, B, whole_fits ? first + 1 : first);
  if (whole_fits && tier_->contains(keys.back())) return first;
  // A partial block, worth reading only when it holds more than the memory's match.
  const BlockKey parent = first == 0 ? kRootBlockKey : keys[static_cast<size_t>(first - 1)];
  const int32_t n_partial = tier_->longest_partial(
      parent, ns,
      prompt.subspan(static_cast<size_t>(first) * B, static_cast<size_t>(cap - first * B)));
  return first * B + n_partial > match.n_tokens ? first : -1;
}

bool DiskPrefixTier::plan(PrefixCache& cache, std::string_view ns, std::span<const TokenId> prompt,
                          const PrefixMatch& match, DiskLoad& load) {
  const NamespaceDigest digest = namespace_digest(ns);
  const int32_t first = first_block_to_load(digest, prompt, match);
  if (first < 0) return false;
  const int32_t n = tier_->chain_length(digest, prompt, first, max_tokens(prompt));
  if (n == 0) return false;
  load = DiskLoad{};
  load.first_block = first;
  load.n_planned = n;
  const std::span<const BlockId> shared =
      std::span<const BlockId>(match.blocks).first(static_cast<size_t>(first));
  if (n_held_blocks_ + n <= max_held_blocks_ && cache.hold_for_restore(shared, n, load.table)) {
    load.n_held = n;
    n_held_blocks_ += n;
  }
  return true;
}

void DiskPrefixTier::read(std::string_view ns, std::span<const TokenId> prompt, KvStorage& kv,
                          DiskLoad& load) {
  const size_t bytes = kv.layout().bytes_per_block();
  std::vector<uint8_t*> into;
  if (load.table.empty()) {
    load.staged.resize(static_cast<size_t>(load.n_planned) * bytes);
    for (int32_t i = 0; i < load.n_planned; ++i)
      into.push_back(load.staged.data() + static_cast<size_t>(i) * bytes);
  } else {
    // Pool blocks this load holds: nothing else reads or writes them until install.
    for (size_t i = static_cast<size_t>(load.first_block); i < load.table.size(); ++i)
      into.push_back(kv.block_data(load.table[i]));
  }
  const double ms_before = tier_->stats().read_ms;
  load.n_tokens = tier_->read_chain_into(namespace_digest(ns), prompt, load.first_block,
                                         max_tokens(prompt), into);
  load.ms = tier_->stats().read_ms - ms_before;
}

int32_t DiskPrefixTier::install(PrefixCache& cache, KvStorage& kv, std::string_view ns,
                                std::span<const TokenId> prompt, DiskLoad& load) {
  const auto n_read = static_cast<int32_t>(load.n_tokens.size());
  const int32_t first = load.first_block;
  if (load.table.empty() && n_read > 0) {
    // Staged: the blocks before the loaded ones must still be cached (they are the shared part
    // of the path the loaded blocks hang under), and the pool must have room now.
    const PrefixMatch match = cache.match(ns, prompt);
    if (match.n_full_blocks < first ||
        !cache.hold_for_restore(
            std::span<const BlockId>(match.blocks).first(static_cast<size_t>(first)), n_read,
            load.table)) {
      release(cache, load);  // the staged bytes go now, not when the request ends
      return 0;
    }
    const size_t bytes = kv.layout().bytes_per_block();
    for (int32_t i = 0; i < n_read; ++i) {
      std::memcpy(kv.block_data(load.table[static_cast<size_t>(first + i)]),
                  load.staged.data() + static_cast<size_t>(i) * bytes, bytes);
    }
  }
  int32_t n_loaded_tokens = 0;
  for (int32_t n : load.n_tokens) n_loaded_tokens += n;
  int32_t n_taken = 0;
  if (n_read > 0) {
    const std::span<const TokenId> tokens =
        prompt.first(static_cast<size_t>(first * block_size_ + n_loaded_tokens));
    n_taken = cache.install_restored(
        ns, tokens, std::span<const BlockId>(load.table).first(static_cast<size_t>(first + n_read)),
        first);
  }
  release(cache, load);
  // Every block taken: all the loaded tokens; else (the tree had some of the positions, or took
  // no partial block) count the whole blocks it took.
  return n_taken == n_read ? n_loaded_tokens : n_taken * block_size_;
}

void DiskPrefixTier::release(PrefixCache& cache, DiskLoad& load) {
  if (!load.table.empty()) {
    n_held_blocks_ -= load.n_held;
    cache.release_restore(load.table);
  }
  load = DiskLoad{};
}

}  // namespace trellis
