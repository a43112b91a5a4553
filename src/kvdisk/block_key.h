// Content keys of KV blocks on disk. A block's KV depends on every token before it, so its key
// chains the key of the block before it with its own tokens and the cache namespace:
//
//   key(j) = SHA-256("trellis-kv-chain" | key(j - 1) | namespace digest | tokens of block j)
//   key(-1) = 32 zero bytes
//
// A partial block (the last block of a cached sequence that ends inside it, holding 1..B-1
// tokens) has the key of the same formula over its tokens: fewer tokens, another key.
//
// Equal keys therefore mean equal token prefixes in the same namespace (up to SHA-256
// collisions), which is all the KV of a block depends on. The namespace enters as a digest, so
// the disk holds no API key or salt in the clear, and a request can only compute the keys of its
// own namespace: it never finds another namespace's blocks.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/token_id.h"

namespace trellis {

using BlockKey = std::array<uint8_t, 32>;
using NamespaceDigest = std::array<uint8_t, 32>;

inline constexpr BlockKey kRootBlockKey{};  // the "parent" of block 0

NamespaceDigest namespace_digest(std::string_view ns);

BlockKey chain_block_key(const BlockKey& parent, const NamespaceDigest& ns,
                         std::span<const TokenId> block_tokens);

// The keys of the first n_blocks whole blocks of `tokens`: keys[j] covers tokens
// [0, (j + 1) * block_size). Preconditions: block_size > 0, n_blocks * block_size <= size.
std::vector<BlockKey> chain_block_keys(const NamespaceDigest& ns, std::span<const TokenId> tokens,
                                       int32_t block_size, int32_t n_blocks);

// The keys of the partial blocks tokens[0, k) under `parent`, for k = 1 .. tokens.size():
// keys[k - 1] == chain_block_key(parent, ns, tokens.first(k)), computed in one pass.
std::vector<BlockKey> partial_block_keys(const BlockKey& parent, const NamespaceDigest& ns,
                                         std::span<const TokenId> tokens);

// 64 lower-case hex digits (file names).
std::string block_key_hex(const BlockKey& key);

struct BlockKeyHash {
  size_t operator()(const BlockKey& key) const {
    size_t h = 0;  // the key is already a uniform hash: its first bytes are enough
    for (size_t i = 0; i < sizeof(size_t); ++i) h = (h << 8) | key[i];
    return h;
  }
};

}  // namespace trellis
