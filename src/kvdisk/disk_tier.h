// The disk tier of the prefix cache: KV blocks the pool evicted (whole blocks, and the partial
// last blocks of cached sequences), kept in files under a cache directory, with their own LRU
// order and byte budget, across restarts.
//
// Layout of the cache directory:
//   DIR/lock                      flock'ed by the one process using DIR (dir_lock.h)
//   DIR/model-digests             remembered model file hashes (tier_identity.h)
//   DIR/tier-<digest>/identity    what the tier is bound to, readable (TierIdentity::describe)
//   DIR/tier-<digest>/blocks/     one file per block, <key hex>.blk (block_record.h)
//   DIR/tier-<digest>/tmp/        records being written
//
// Crash safety. A record is written to tmp/, fsync'ed, renamed into blocks/, and the directory is
// fsync'ed; only then is it added to the in-memory index. The index is rebuilt at open from the
// names in blocks/, so a block is indexed exactly when its whole record is durable. Killing the
// process at any moment leaves at worst a file in tmp/ (deleted at open). A record whose size or
// header is wrong is dropped at open; one whose checksum fails is dropped when read (its
// request recomputes the block). Nothing here can make open() fail except the directory itself.
//
// The index is a forest by construction: a record names its parent's key, and open() drops
// records whose parent is missing (unreachable: lookups walk keys from block 0). For the same
// reason a block dropped later (over the budget, or corrupt) takes its descendants with it.
//
// LRU: least recently used first, by written or read time (file modification times carry the
// order over restarts; ties by key). Over the budget, the oldest blocks go. A chain read touches
// its deepest block first, so parents are more recent than their children and go after them.
//
// Threads: one writer thread; every public function may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/result.h"
#include "kvdisk/block_key.h"
#include "kvdisk/block_record.h"
#include "kvdisk/dir_lock.h"
#include "kvdisk/tier_identity.h"

namespace trellis {

struct DiskTierConfig {
  std::string dir;
  int64_t budget_bytes = 0;  // > 0: room for at least one block
  TierIdentity identity;
  // Records waiting for the writer beyond this many bytes are dropped, not waited for: the step
  // loop that hands them over never blocks on the disk.
  int64_t max_pending_bytes = int64_t{256} << 20;
  // After a failed write (a full disk), the writer waits this long before it tries the same
  // record again; the first failure of a run is logged, and the recovery.
  std::chrono::milliseconds write_retry{2000};
  // One line per notable event (a foreign tier ignored, a corrupt record dropped); default stderr.
  std::function<void(const std::string&)> log;
};

struct DiskTierStats {
  int64_t n_blocks = 0;  // indexed (durable) blocks
  int64_t n_bytes = 0;   // their files' bytes
  int64_t budget_bytes = 0;
  int64_t n_pending = 0;  // queued for the writer
  int64_t n_blocks_written = 0;
  int64_t n_bytes_written = 0;
  int64_t n_blocks_read = 0;
  int64_t n_bytes_read = 0;
  int64_t n_blocks_read_pending = 0;  // read from the writer's queue, not yet durable
  int64_t n_writes_dropped = 0;       // the queue was full
  int64_t n_blocks_evicted = 0;       // over the budget
  int64_t n_corrupt_dropped = 0;      // failed verification (at open or when read)
  int64_t n_missing_dropped = 0;      // indexed, but the file was deleted from outside
  int64_t n_write_errors = 0;         // write attempts the disk refused (full, permissions)
  double read_ms = 0;                 // time spent in read_chain, in total
};

class DiskTier {
 public:
  // Locks DIR, opens (or creates) the tier of config.identity and rebuilds its index. Errors for
  // a bad budget, a directory that cannot be created, or one another process holds.
  static Result<std::unique_ptr<DiskTier>> open(DiskTierConfig config);
  // Writes what is queued, then stops the writer.
  ~DiskTier();
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  const RecordGeometry& geometry() const { return geometry_; }
  int32_t block_size() const { return geometry_.block_size; }
  const std::string& tier_dir() const { return tier_dir_; }

  // True when the block is indexed or queued for writing.
  bool contains(const BlockKey& key) const;
  // Queues a record for the writer. False (dropped) when it is indexed or queued already, or the
  // queue is full. Never waits on I/O. Precondition: the record matches geometry().
  bool write_async(BlockRecord record);
  // Blocks until every queued record is written, or the disk refuses writes (then they wait for
  // the writer's retries).
  void wait_idle();

  // The most tokens k (1 <= k < block size, k <= tokens.size()) such that the partial block
  // tokens[0, k) under the block `parent` is indexed or queued; 0 when there is none.
  int32_t longest_partial(const BlockKey& parent, const NamespaceDigest& ns,
                          std::span<const TokenId> tokens) const;

  // The longest prefix of `tokens` (namespace `ns`) on disk or queued for it, at most
  // max_tokens: whole blocks 0, 1, ..., then the longest partial block that goes on from the last
  // of them, read (queued ones copied from the queue) and verified: each record's key, parent,
  // namespace and tokens must be what the chain expects. Stops at the first block missing or
  // failing verification (that one is dropped from the index and deleted, and no partial block
  // follows it). Touches the blocks read.
  std::vector<BlockRecord> read_chain(const NamespaceDigest& ns, std::span<const TokenId> tokens,
                                      int32_t max_tokens) {
    return read_chain(ns, tokens, 0, max_tokens);
  }
  // The same from block first_block on (the blocks before it are held elsewhere): returns blocks
  // first_block, first_block + 1, ...
  std::vector<BlockRecord> read_chain(const NamespaceDigest& ns, std::span<const TokenId> tokens,
                                      int32_t first_block, int32_t max_tokens);
  // How many blocks read_chain would return if every indexed or queued block read back whole
  // (no I/O: the index alone).
  int32_t chain_length(const NamespaceDigest& ns, std::span<const TokenId> tokens,
                       int32_t first_block, int32_t max_tokens) const;
  // read_chain with the K/V of the i-th block read written to kv[i] (geometry().kv_bytes bytes;
  // KV pool blocks, so that nothing is copied twice): reads at most kv.size() blocks and returns
  // how many tokens each holds. A destination after the last block read holds garbage.
  std::vector<int32_t> read_chain_into(const NamespaceDigest& ns, std::span<const TokenId> tokens,
                                       int32_t first_block, int32_t max_tokens,
                                       std::span<uint8_t* const> kv);

  DiskTierStats stats() const;
  // Indexed keys, least recently used first (tests).
  std::vector<BlockKey> lru_order() const;

 private:
  DiskTier() = default;
  Status init(DiskTierConfig config);
  void log(const std::string& line) const;
  void load_index();
  void prune_orphans();
  void writer_loop();
  // Writes one record durably: 0, or the errno of the step that failed (then nothing is
  // indexed and no file is left).
  int write_record(const BlockRecord& record);
  void log_write_recovery_locked();
  void forget_missing(const BlockKey& key);
  // Adds a durable record to the index and evicts over the budget (under mutex_).
  void index_locked(const BlockKey& key, const BlockKey& parent);
  void evict_over_budget_locked(std::vector<BlockKey>& victims);
  void drop_locked(const BlockKey& key, std::vector<BlockKey>& dropped);
  void unlink_child_locked(const BlockKey& parent, const BlockKey& child);
  void touch(const BlockKey& key);
  std::string block_path(const BlockKey& key) const;
  // Reads the record of `key` and verifies it, then copies its K/V into kv (kv_bytes; untouched
  // when the record fails its checks); "missing" when the file is gone. Returns its other fields.
  Result<BlockRecord> read_record_into(const BlockKey& key, uint8_t* kv);
  // The record queued (or being written) under `key`, or null. Caller holds mutex_.
  const BlockRecord* pending_locked(const BlockKey& key) const;
  // One block of a chain: read (its K/V into kv) and verified.
  enum class ChainStep { READ, MISSING, DROPPED };
  ChainStep read_block(const BlockKey& key, const BlockKey& parent, const NamespaceDigest& ns,
                       std::span<const TokenId> block_tokens, uint8_t* kv);
  // Walks the chain of `tokens` from first_block as read_chain does, calling visit(key, parent,
  // block tokens) for each block it would read, until a visit says other than READ. Returns the
  // number of blocks visited with READ.
  // A block read_chain_blocks read: its key, its parent's, and its tokens (within `tokens`).
  struct ChainBlock {
    BlockKey key{};
    BlockKey parent{};
    std::span<const TokenId> tokens;
  };
  // read_chain_into's work, with what each block read is.
  std::vector<ChainBlock> read_chain_blocks(const NamespaceDigest& ns,
                                            std::span<const TokenId> tokens, int32_t first_block,
                                            int32_t max_tokens, std::span<uint8_t* const> kv);
  using ChainVisit = std::function<ChainStep(const BlockKey& key, const BlockKey& parent,
                                             std::span<const TokenId> block_tokens)>;
  int32_t walk_chain(const NamespaceDigest& ns, std::span<const TokenId> tokens,
                     int32_t first_block, int32_t max_tokens, const ChainVisit& visit) const;

  struct Entry {
    std::list<BlockKey>::iterator lru;
    BlockKey parent{};
  };

  DiskTierConfig config_;
  RecordGeometry geometry_;
  DirLock lock_;
  std::string tier_dir_, blocks_dir_, tmp_dir_;
  int blocks_dir_fd_ = -1;
  int64_t max_blocks_ = 0;  // the budget in whole records

  mutable std::mutex mutex_;
  std::condition_variable queue_changed_;
  std::list<BlockKey> lru_;  // front: least recently used
  std::unordered_map<BlockKey, Entry, BlockKeyHash> index_;
  std::unordered_multimap<BlockKey, BlockKey, BlockKeyHash> children_;  // parent -> child, indexed
  std::deque<BlockRecord> queue_;
  std::unordered_set<BlockKey, BlockKeyHash> queued_;
  bool writing_ = false;  // the writer holds writing_record_ outside the queue
  BlockRecord writing_record_;
  bool stopping_ = false;
  int64_t failing_since_ = 0;    // consecutive failed writes (0: the last write succeeded)
  bool missing_logged_ = false;  // files deleted from outside were reported
  DiskTierStats stats_;
  std::thread writer_;  // last: started once everything above exists
};

}  // namespace trellis
