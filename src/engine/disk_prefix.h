// The engine's side of the disk tier (kvdisk/disk_tier.h): blocks the prefix cache evicts are
// saved there, and prompts' prefixes found there are read back off the loop thread, then cached
// in the pool before the request is scheduled, so that it runs as an ordinary cache hit.
//
//   loop thread:    evict -> spill(node): the node's blocks not yet on disk (whole blocks, and
//                   its partial last block) are copied out of the pool and queued for the tier's
//                   writer (no I/O on the loop)
//   loop thread:    start_load(seq): a waiting request's prompt continues on disk: pool blocks
//                   are held for those blocks and the read is queued; the request waits for its
//                   KV (SequenceState::WAITING_FOR_KV, see sched/sequence.h)
//   loader thread:  the read: the K/V straight into those pool blocks -> `done` hands the request
//                   back to the loop
//   loop thread:    finish_load(seq): the read blocks are cached, then the request is admitted
//                   like any other, as a cache hit
//
// When: on arrival, and again when a request next to be admitted finds less of its prompt in the
// pool than the disk holds (the requests admitted before it evicted its prefix to the tier). Not
// earlier, while the slots are busy: what was read would be evicted again by the running ones.
//
// Reading into the pool, not into buffers of its own, matters on a restart: a long prompt's K/V
// is tens of megabytes, and fresh memory costs more to touch than the read itself (the pool was
// touched when it was created). Held pool blocks are out of the scheduler's reach while the read
// runs, so they are capped (DiskPrefixConfig::max_held_blocks) to leave room for the longest
// sequence; a load beyond the cap is read into memory of its own and copied in at install.
//
// A block's KV on disk is the KV of its tokens (B, or fewer in a node's partial last block)
// given every token before it, which the chained block keys pin down (kvdisk/block_key.h). The
// partial block matters: a system prompt shared by many questions ends inside a block, and
// without it every request after a restart would recompute up to B - 1 of its tokens.
//
// Why the disk keeps an index of its own rather than radix tree nodes marked "on disk": a chained
// key names a block's whole prefix, so the disk index alone answers "how far does this prompt
// continue on disk", and it is rebuilt at start-up from the file names with no tree to restore.
// The radix tree keeps its invariant (every node's blocks are pool blocks with tree references)
// and its code unchanged. The price: a lookup walks the tree, then the disk index from the first
// block the tree lacks (and tries each length of a partial block there).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/result.h"
#include "kv/kv_storage.h"
#include "kvdisk/disk_tier.h"
#include "prefix/prefix_cache.h"
#include "sched/sequence.h"

namespace trellis {

struct DiskPrefixConfig {
  std::string dir;
  int64_t budget_bytes = 0;
  std::string model_path;                       // its SHA-256 binds the tier to the model
  std::string architecture;                     // general.architecture
  std::function<void(const std::string&)> log;  // default stderr
  // Pool blocks that loads in flight may hold at once (see above); 0: every load is staged.
  int32_t max_held_blocks = 0;
};

// One request's load: blocks first_block, first_block + 1, ... of its prompt.
struct DiskLoad {
  int32_t first_block = 0;
  int32_t n_planned = 0;  // blocks the index had when planned
  int32_t n_held = 0;     // fresh pool blocks held, counted against max_held_blocks
  // Read into the pool: the cached blocks before first_block, then one fresh block per planned
  // block, a reference held on each. Empty while a staged load is in flight.
  std::vector<BlockId> table;
  std::vector<uint8_t> staged;    // otherwise the K/V read, block after block, until install
  std::vector<int32_t> n_tokens;  // tokens of each block read (the read may stop early)
  double ms = 0;                  // reading and verifying them
};

// The loads' figures (loop thread).
struct DiskLoadCounters {
  int64_t n_hit_tokens = 0;    // prompt tokens cached from the tier, in total
  double load_ms = 0;          // reading them
  int64_t n_loads = 0;         // loads finished
  int64_t n_loads_staged = 0;  // of those, read into memory of their own and copied into the
                               // pool (it had no blocks to spare while they read)
};

class DiskPrefixTier {
 public:
  // Opens the tier for the model and KV layout (identity, lock, index). Errors as DiskTier::open.
  static Result<std::unique_ptr<DiskPrefixTier>> open(const DiskPrefixConfig& config,
                                                      const KvLayout& layout);
  // Runs the loads still queued, then stops the loader; the tier then writes what is queued.
  ~DiskPrefixTier();
  DiskPrefixTier(const DiskPrefixTier&) = delete;
  DiskPrefixTier& operator=(const DiskPrefixTier&) = delete;

  // Loop thread, as the prefix cache's spill observer: queues the node's blocks that the tier
  // lacks (whole ones and its partial last block). `kv` holds their bytes (still intact during the
  // observer call).
  void spill(const EvictedNode& node, const KvStorage& kv);

  // Loop thread: when the tier holds more of `seq`'s prompt than the pool, plans the read into
  // `load` and queues it; `done` runs on the loader thread once it is read, to hand the sequence
  // back to the loop (then finish_load). False when there is nothing to read, or the sequence
  // wants its prompt's logits (cached positions have none). `seq` and `load` must stay alive and
  // untouched until `done`.
  bool start_load(PrefixCache& cache, KvStorage& kv, const Sequence& seq, DiskLoad& load,
                  std::function<void()> done);
  // Loop thread: caches what the load read for `seq`, lets go of its blocks and counts it.
  // Returns the prompt tokens the cache took from disk (0 when a staged load finds the blocks
  // before its first one evicted meanwhile, or the pool has no room: the request then computes
  // them).
  int32_t finish_load(PrefixCache& cache, KvStorage& kv, const Sequence& seq, DiskLoad& load);
  // Loads still queued, and those started from now on, skip the read (shutdown); `done` still
  // runs. Any thread.
  void cancel_reads() { reads_cancelled_ = true; }
  // Waits until every load queued so far has run.
  void wait_loads();
  // Loop thread (or after it): lets go of a load's blocks without caching them.
  void release(PrefixCache& cache, DiskLoad& load);

  // Waits until every queued write is durable.
  void wait_writes() { tier_->wait_idle(); }
  DiskTierStats stats() const { return tier_->stats(); }
  const DiskLoadCounters& load_counters() const { return counters_; }

 private:
  DiskPrefixTier() = default;
  void loader_loop();
  // Plans the load of the prompt's blocks after what the cache matched in memory (reading stops
  // at the match cap, prompt length - 1, so that the last prompt token is always computed),
  // holding pool blocks for it when the cap allows. False when the disk has nothing beyond the
  // match.
  bool plan(PrefixCache& cache, std::string_view ns, std::span<const TokenId> prompt,
            const PrefixMatch& match, DiskLoad& load);
  // Runs `job` on the loader thread (jobs run in order; every queued job runs, even at shutdown).
  void load_async(std::function<void()> job);
  // Loader thread: reads the planned blocks (the last one may be partial).
  void read(std::string_view ns, std::span<const TokenId> prompt, KvStorage& kv, DiskLoad& load);
  // Caches what `load` read, under the blocks the cache holds before it, and lets go of its
  // blocks; the prompt tokens the cache took (see finish_load).
  int32_t install(PrefixCache& cache, KvStorage& kv, std::string_view ns,
                  std::span<const TokenId> prompt, DiskLoad& load);
  // The most prompt tokens worth reading: all but the last, which is always computed.
  int32_t max_tokens(std::span<const TokenId> prompt) const;
  // The first block of the prompt worth reading from disk, given what the cache matched in
  // memory; -1 when the disk has nothing beyond it.
  int32_t first_block_to_load(const NamespaceDigest& ns, std::span<const TokenId> prompt,
                              const PrefixMatch& match) const;

  std::unique_ptr<DiskTier> tier_;
  int32_t block_size_ = 0;
  int32_t max_held_blocks_ = 0;
  int32_t n_held_blocks_ = 0;  // fresh pool blocks held by loads (loop thread)
  DiskLoadCounters counters_;  // loop thread
  std::atomic<bool> reads_cancelled_{false};
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> jobs_;
  int32_t n_jobs_running_ = 0;
  bool stopping_ = false;
  std::thread loader_;  // last: started once everything above exists
};

}  // namespace trellis
