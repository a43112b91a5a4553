// RadixAttention's prefix index: a radix tree over token sequences whose nodes hold the KV blocks
// of their edges, one tree per cache namespace, over the shared BlockPool.
//
// Representation. A node's edge is a run of tokens at absolute positions [start, end) (end is the
// node's depth). The KV of position p lives in block index j = p / B (B = block_size) of the
// path's block table, at slot p % B. A node owns
//   - full blocks:  block indices j in [start / B, end / B), i.e. every block whose last slot
//                   (j + 1) * B - 1 falls inside the edge; blocks[0] is index start / B;
//   - a tail block: iff end % B != 0, block index end / B holding slots [0, end % B) valid.
// A block straddling the node's start also holds the parent's last tokens (copied there), which is
// why the block whose end lies in a child belongs to the child: siblings diverging inside a block
// need their own copies of it.
//
//   B = 4, positions:     0 1 2 3 | 4 5 6 7 | 8 9
//   A = [0,6)             a b c d | e f             full {j0: b0}, tail (j1: b1, slots 0-1)
//   C = [6,10) under A                  g h | i j   full {j1: b2}, tail (j2: b3, slots 0-1)
//   D = [6,7)  under A                  x           no full block, tail (j1: b4, slots 0-2)
//   b2 and b4 begin with copies of e f: block index 1 exists in three versions, one per node.
//
// Splitting X = [s, e) at p keeps every block index on one node: the new parent [s, p) takes the
// full blocks [s / B, p / B); when p % B != 0 its tail is X's block p / B, shared (the pool counts
// one tree reference per slot, so that block has tree_refs 2). Hence every node ending inside a
// block has a tail, and a match ending at position d gets the block holding d - 1 from the node
// that holds d - 1.
//
// Match modes. BLOCK: a match is rounded down to whole blocks, insert caches whole blocks only.
// TOKEN (default): a match keeps every matched token; when it ends inside a block, the last
// reported block is cached and read-only: the caller copies its first n_partial_slots slots into
// a fresh block (KvStorage::copy_block) and writes there. Insert caches a partial last block too.
//
// References. The tree holds one pool reference per block slot it indexes (BlockPool::
// cache_retain); requests hold their own (retain / alloc). The tree never touches KV memory.
//
// Eviction: least recently used unlocked leaves first (order in prefix/leaf_lru.h), skipping a
// leaf any of whose blocks a request still holds; a parent becomes a leaf when its last child
// goes. The clock is logical: one tick per lock() or insert().
//
// A request's lifecycle (prepare, then commit):
//   PrefixMatch m = tree.match_prefix(ns, prompt, prompt_len - 1);   // no side effects
//   need = tree.fresh_blocks_needed(m, total_len);
//   PrefixLock lock = tree.lock(m);          // pins the path before anything is evicted
//   if (pool.n_free() + tree.count_evictable_blocks() < need) abandon (the lock unlocks);
//   if (!pool.can_alloc(need)) tree.evict(need - pool.n_free());   // now certain to suffice
//   retain m.blocks[0 .. n_full_blocks); alloc need; copy the partial block if any;
//   ... prefill, decode ...; insert(ns, tokens_with_kv, block_table); release the block table.
//
// Not thread-safe: one owner (the engine loop).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/token_id.h"
#include "kv/block_pool.h"
#include "prefix/leaf_lru.h"

namespace trellis {

enum class MatchMode { TOKEN, BLOCK };

struct RadixTreeConfig {
  int32_t block_size = 32;  // token positions per KV block; > 0
  MatchMode mode = MatchMode::TOKEN;
};

// A node of the tree; opaque outside radix_tree.cpp.
struct PrefixNode;

struct PrefixMatch {
  int32_t n_tokens = 0;         // matched prefix length, <= max_tokens
  int32_t n_full_blocks = 0;    // n_tokens / block_size: blocks to share (retain) as they are
  int32_t n_partial_slots = 0;  // n_tokens % block_size in TOKEN mode, 0 in BLOCK mode
  // n_full_blocks shared blocks (block indices 0, 1, ...), then, when n_partial_slots > 0, the
  // cached block whose slots [0, n_partial_slots) hold the match's last tokens: never write it;
  // copy it with KvStorage::copy_block(partial_block(), fresh, n_partial_slots). It belongs to
  // `node`, so lock(match) keeps it alive until copied.
  std::vector<BlockId> blocks;
  // The node holding position n_tokens - 1; null when n_tokens == 0. Valid until the next
  // evict(): lock it first.
  PrefixNode* node = nullptr;

  bool has_partial_block() const { return n_partial_slots > 0; }
  BlockId partial_block() const { return blocks.back(); }  // precondition: has_partial_block()
};

struct InsertResult {
  int32_t n_taken = 0;      // given blocks the tree now references (new slots)
  int32_t n_not_taken = 0;  // given blocks the tree did not take: it already had those positions
                            // (the same block or a duplicate), or BLOCK mode left out the partial
};

class RadixTree;

// Pins a node and all its ancestors against eviction until destroyed or reset(). Move-only.
// Precondition: destroyed (or reset) before its tree.
class PrefixLock {
 public:
  PrefixLock() = default;
  ~PrefixLock() { reset(); }
  PrefixLock(PrefixLock&& other) noexcept : tree_(other.tree_), node_(other.node_) {
    other.tree_ = nullptr;
    other.node_ = nullptr;
  }
  PrefixLock& operator=(PrefixLock&& other) noexcept;
  PrefixLock(const PrefixLock&) = delete;
  PrefixLock& operator=(const PrefixLock&) = delete;

  // Unlocks now (no-op when empty).
  void reset();
  bool locked() const { return node_ != nullptr; }

 private:
  friend class RadixTree;
  PrefixLock(RadixTree* tree, PrefixNode* node) : tree_(tree), node_(node) {}

  RadixTree* tree_ = nullptr;
  PrefixNode* node_ = nullptr;
};

// What evict() removed, for observers (tests, metrics). Views are valid during the call only.
struct EvictedNode {
  std::string_view ns;
  std::span<const TokenId> path;    // tokens from the root through the node's end
  int32_t start = 0;                // the node's edge was path[start, path.size())
  std::span<const BlockId> blocks;  // the node's full blocks, then its tail if any
  int32_t n_blocks_freed = 0;       // blocks that went back to the free list
};
using EvictObserver = std::function<void(const EvictedNode&)>;

class RadixTree {
 public:
  // Precondition: `pool` outlives the tree; config.block_size > 0.
  RadixTree(BlockPool& pool, RadixTreeConfig config);
  // Drops every tree reference (blocks nobody else holds become free).
  // Precondition: no PrefixLock on this tree is left.
  ~RadixTree();
  RadixTree(const RadixTree&) = delete;
  RadixTree& operator=(const RadixTree&) = delete;

  const RadixTreeConfig& config() const { return config_; }
  int32_t block_size() const { return config_.block_size; }

  // The longest cached prefix of `tokens` in namespace `ns`, at most max_tokens long (callers pass
  // prompt length - 1), rounded down to whole blocks in BLOCK mode. No side effects (LRU is
  // touched by lock()). The returned blocks carry no reference: retain them before the next
  // evict(). O(matched length).
  PrefixMatch match_prefix(std::string_view ns, std::span<const TokenId> tokens,
                           int32_t max_tokens) const;

  // What the tree holds after `tokens` in namespace `ns`, at most max_tokens long, into `out` (its
  // capacity reused): when all of
  // `tokens` is a cached path, the rest of the edge it ends in, then on down the most recently
  // used child at each node (a node's last_access is its subtree's latest use; ties: the lower
  // first token). Empty when `tokens` is not wholly cached or nothing follows. No side effects.
  // O(tokens.size() + max_tokens + children looked at). Speculative decoding drafts from it: what
  // earlier requests went on with after the same context.
  void continuation(std::string_view ns, std::span<const TokenId> tokens, int32_t max_tokens,
                    std::vector<TokenId>& out) const;

  // Pins exactly the matched prefix: when the match ends inside match.node's edge, the node is
  // split there first (its blocks keep their ids), so the rest of the edge stays evictable; then
  // the path is touched (it becomes the most recently used) and locked. Afterwards match.node may
  // be the unlocked lower half: use the lock, not the node. Empty lock when match.node is null.
  // Every ancestor on the path that ends inside a block switches its tail to its child's version
  // of that block (same tokens, same KV): the path then pins no block beyond the match's own, so a
  // request never holds more than its blocks plus the partial block it copies. A tail nobody else
  // holds is freed (BlockPool::cache_swap). O(depth in nodes + edge length).
  PrefixLock lock(const PrefixMatch& match);
  // Touches the path to `node` and pins it as it is.
  PrefixLock lock(PrefixNode* node);

  // Caches `tokens` of namespace `ns`, whose KV lives in `blocks` (blocks[j] holds positions
  // [j * B, (j + 1) * B)). Preconditions: blocks.size() == ceil(tokens.size() / B); the caller
  // holds a reference on every block; the KV of every given token is written (at a request's end,
  // leave out the last sampled token); while the request still writes into its last block, pass
  // whole blocks only (that block becomes shared and read-only once cached).
  // The tree takes its own reference on the blocks of positions it did not have and touches the
  // path; the caller keeps its references and releases them as usual (a duplicate block is then
  // freed). BLOCK mode caches floor(size / B) whole blocks only. O(tokens.size()).
  InsertResult insert(std::string_view ns, std::span<const TokenId> tokens,
                      std::span<const BlockId> blocks);

  // Evicts least recently used unlocked leaves whose blocks no request holds, one after another
  // (parents become leaves in turn), until at least n_blocks blocks went back to the free list or
  // nothing evictable is left. Returns the number of blocks freed (may exceed n_blocks by the rest
  // of the last node). O(evicted nodes x log leaves + skipped leaves).
  int32_t evict(int32_t n_blocks, const EvictObserver& observer = {});
  // Evicts everything evictable.
  int32_t flush(const EvictObserver& observer = {});

  // Blocks that flush() would free now. O(nodes + their blocks). For admission decisions.
  int32_t count_evictable_blocks() const;

  // Fresh blocks a request of n_tokens tokens needs beyond the whole blocks it shares from
  // `match` (the copy of a partial block counts as fresh): ceil(n_tokens / B) - n_full_blocks.
  int32_t fresh_blocks_needed(const PrefixMatch& match, int32_t n_tokens) const {
    return (n_tokens + block_size() - 1) / block_size() - match.n_full_blocks;
  }

  int64_t n_nodes() const { return n_nodes_; }  // excluding the namespace roots
  // Nodes without children (excluding the namespace roots): one per cached sequence that is not
  // a prefix of another. O(1), kept up to date by insert and evict.
  int64_t n_leaves() const { return n_leaves_; }
  // Namespaces with something cached (a namespace's root goes with its last node).
  int32_t n_namespaces() const { return static_cast<int32_t>(roots_.size()); }
  int32_t n_evictable_leaves() const { return static_cast<int32_t>(lru_.size()); }

  // Verifies the tree's structure against the representation above, lock counts, the evictable
  // set, that the tree's block slots agree with the pool's tree_refs, and the pool's own
  // invariants. O(nodes + blocks + pool size).
  Status check_invariants() const;

  // One line per node, namespaces and children in sorted order, for tests:
  //   ns "": / [0,6) 1,2,3,4,5,6 blocks=0 tail=1 lock=1 (lock only when > 0), indented by depth.
  std::string debug_string() const;

 private:
  friend class PrefixLock;
  using NodePtr = std::unique_ptr<PrefixNode>;

  void unlock(PrefixNode* node);
  PrefixNode* root_for(std::string_view ns);
  PrefixNode* split(PrefixNode* node, int32_t n_head_tokens);
  void share_tails_along(PrefixNode* node);
  void touch(PrefixNode* node, uint64_t tick);
  void update_lru(PrefixNode* node);
  bool held_by_request(const PrefixNode* node) const;
  int32_t drop_blocks(PrefixNode* node);

  BlockPool& pool_;
  RadixTreeConfig config_;
  std::map<std::string, NodePtr, std::less<>> roots_;  // one per non-empty namespace
  LeafLru lru_;
  LeafLru::node_type spare_lru_node_;  // see update_lru
  uint64_t clock_ = 0;
  uint64_t next_id_ = 0;
  int64_t n_nodes_ = 0;
  int64_t n_leaves_ = 0;
};

}  // namespace trellis
