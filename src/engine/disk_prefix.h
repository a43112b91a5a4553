// The engine's side of the disk tier (kvdisk/disk_tier.h): blocks the prefix cache evicts are
// saved there, and prompts' prefixes found there are read back off the loop thread, then cached
// in the pool before the request is scheduled, so that it runs as an ordinary cache hit.
//
//   loop thread:    evict -> spill(node): the node's blocks not yet on disk (whole blocks, and
//                   its partial last block) are copied out of the pool and queued for the tier's
//                   writer (no I/O on the loop)
//   loop thread:    a new request: plan(prompt, match) finds blocks on disk and holds pool
//                   blocks for them -> load_async(job)
//   loader thread:  job: read(load): the K/V straight into those pool blocks -> the request goes
//                   back to the loop
//   loop thread:    install(cache, load): the read blocks are cached, then the request is queued
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

  // Loop thread: plans the load of the prompt's blocks after what the cache matched in memory
  // (reading stops at the match cap, prompt length - 1, so that the last prompt token is always
  // computed), holding pool blocks for it when the cap allows. False when the disk has nothing
  // beyond the match.
  bool plan(PrefixCache& cache, std::string_view ns, std::span<const TokenId> prompt,
            const PrefixMatch& match, DiskLoad& load);
  // Runs `job` on the loader thread (jobs run in order; every queued job runs, even at shutdown).
  void load_async(std::function<void()> job);
  // Waits until every job queued so far has run.
  void wait_loads();
  // Loader thread: reads the planned blocks (the last one may be partial).
  void read(std::string_view ns, std::span<const TokenId> prompt, KvStorage& kv, DiskLoad& load);
  // Loop thread: caches what `load` read, under the blocks the cache holds before it, and lets go
  // of its blocks. Returns the prompt tokens the cache took from disk (0 when a staged load
  // finds the blocks before first_block evicted meanwhile, or the pool has no room: the request
  // then computes them).
  int32_t install(PrefixCache& cache, KvStorage& kv, std::string_view ns,
                  std::span<const TokenId> prompt, DiskLoad& load);
  // Loop thread (or after it): lets go of a load's blocks without caching them.
  void release(PrefixCache& cache, DiskLoad& load);

  // Waits until every queued write is durable.
  void wait_writes() { tier_->wait_idle(); }
  DiskTierStats stats() const { return tier_->stats(); }

 private:
  DiskPrefixTier() = default;
  void loader_loop();
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
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> jobs_;
  int32_t n_jobs_running_ = 0;
  bool stopping_ = false;
  std::thread loader_;  // last: started once everything above exists
};

}  // namespace trellis
