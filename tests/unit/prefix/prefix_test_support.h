// A request's side of the prefix cache, as the engine will do it, for the prefix tests:
// match (capped at length - 1), lock, acquire the shared blocks, allocate the rest (the first
// fresh block stands for the copy of a partially matched block), then insert and release.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "kv/block_pool.h"
#include "prefix/radix_tree.h"

namespace trellis::prefix_test {

using Tokens = std::vector<TokenId>;

// The tokens first, first + 1, ..., last.
inline Tokens range(TokenId first, TokenId last) {
  Tokens t;
  for (TokenId i = first; i <= last; ++i) t.push_back(i);
  return t;
}

inline Tokens concat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct Request {
  PrefixMatch match;
  PrefixLock lock;
  std::vector<BlockId> table;  // one request reference on each
};

inline int32_t blocks_for(int32_t n_tokens, int32_t block_size) {
  return (n_tokens + block_size - 1) / block_size;
}

// Returns false, with nothing held and nothing evicted, when the pool cannot hold the request even
// after eviction.
inline bool admit(RadixTree& tree, BlockPool& pool, std::string_view ns,
                  const std::vector<TokenId>& tokens, Request& req) {
  const int32_t n = static_cast<int32_t>(tokens.size());
  req.match = tree.match_prefix(ns, tokens, n - 1);
  const int32_t need = tree.fresh_blocks_needed(req.match, n);
  EXPECT_EQ(need, blocks_for(n, tree.block_size()) - req.match.n_full_blocks);
  req.lock = tree.lock(req.match);  // pins the matched path before anything is evicted
  // Prepare: is there room, counting what eviction could free? If not, abandon unchanged.
  if (pool.n_free() + tree.count_evictable_blocks() < need) {
    req.lock.reset();
    return false;
  }
  // Commit.
  if (!pool.can_alloc(need)) tree.evict(need - pool.n_free());
  EXPECT_TRUE(pool.can_alloc(need));
  if (!pool.can_alloc(need)) return false;
  for (int32_t i = 0; i < req.match.n_full_blocks; ++i) {
    pool.retain(req.match.blocks[static_cast<size_t>(i)]);
    req.table.push_back(req.match.blocks[static_cast<size_t>(i)]);
  }
  pool.alloc(need, req.table);  // a partial match is copied into table[n_full_blocks]
  return true;
}

// Caches the request's tokens, releases its blocks and its lock.
inline InsertResult finish(RadixTree& tree, BlockPool& pool, std::string_view ns,
                           const std::vector<TokenId>& tokens, Request& req) {
  InsertResult result = tree.insert(ns, tokens, req.table);
  pool.release_all(req.table);
  req.table.clear();
  req.lock.reset();
  return result;
}

// admit + finish in one go.
inline void run_request(RadixTree& tree, BlockPool& pool, std::string_view ns,
                        const std::vector<TokenId>& tokens) {
  Request req;
  ASSERT_TRUE(admit(tree, pool, ns, tokens, req));
  finish(tree, pool, ns, tokens, req);
}

inline void expect_ok(const RadixTree& tree) {
  Status status = tree.check_invariants();
  EXPECT_TRUE(status.ok()) << (status.ok() ? "" : status.error().message) << "\n"
                           << tree.debug_string();
}

}  // namespace trellis::prefix_test
