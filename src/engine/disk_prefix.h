// The engine's side of the disk tier (kvdisk/disk_tier.h): blocks the prefix cache evicts are
// saved there, and prompts' prefixes found there are read back off the loop thread, then cached
// in the pool before the request is scheduled, so that it runs as an ordinary cache hit.
//
//   loop thread:    evict -> spill(node): the node's blocks not yet on disk (whole blocks, and
//                   its partial last block) are copied out of the pool and queued for the tier's
//                   writer (no I/O on the loop)
//   loop thread:    a new request: first_block_to_load(prompt, match) >= 0 -> load_async(job)
//   loader thread:  job: read(ns, prompt, first) -> the request goes back to the loop
//   loop thread:    install(cache, load): the read blocks are cached, then the request is queued
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
};

// Blocks read for one request: blocks first_block, first_block + 1, ... of its prompt.
struct DiskLoad {
  int32_t first_block = 0;
  std::vector<BlockRecord> blocks;
  double ms = 0;  // reading and verifying them
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

  // Loop thread: the first block of the prompt worth reading from disk, given what the cache
  // matched in memory; -1 when the disk has nothing beyond it. Reading stops at the match cap
  // (prompt length - 1), so the last prompt token is always computed.
  int32_t first_block_to_load(std::string_view ns, std::span<const TokenId> prompt,
                              const PrefixMatch& match) const;
  // Runs `job` on the loader thread (jobs run in order; every queued job runs, even at shutdown).
  void load_async(std::function<void()> job);
  // Any thread: reads blocks first_block, ... of the prompt (the last one may be partial), up to
  // the match cap.
  DiskLoad read(std::string_view ns, std::span<const TokenId> prompt, int32_t first_block);
  // Loop thread: caches what `load` read, under the blocks the cache holds before it. Returns the
  // prompt tokens the cache took from disk (0 when the blocks before first_block were evicted
  // meanwhile, or the pool has no room: the request then computes them).
  int32_t install(PrefixCache& cache, KvStorage& kv, std::string_view ns,
                  std::span<const TokenId> prompt, const DiskLoad& load);

  // Waits until every queued write is durable.
  void wait_writes() { tier_->wait_idle(); }
  DiskTierStats stats() const { return tier_->stats(); }

 private:
  DiskPrefixTier() = default;
  void loader_loop();
  // The most prompt tokens worth reading: all but the last, which is always computed.
  int32_t max_tokens(std::span<const TokenId> prompt) const;

  std::unique_ptr<DiskTier> tier_;
  int32_t block_size_ = 0;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::thread loader_;  // last: started once everything above exists
};

}  // namespace trellis
