#include "kvdisk/block_key.h"

#include <cassert>

#include "base/sha256.h"

namespace trellis {

NamespaceDigest namespace_digest(std::string_view ns) {
  Sha256 sha;
  sha.update(std::string_view("trellis-kv-namespace"));
  sha.update(ns);
  return sha.finish();
}

namespace {

Sha256 chain_hasher(const BlockKey& parent, const NamespaceDigest& ns) {
  Sha256 sha;
  sha.update(std::string_view("trellis-kv-chain"));
  sha.update(parent);
  sha.update(ns);
  return sha;
}

// A token id as 4 little-endian bytes, so keys do not depend on the host's byte order.
void hash_token(Sha256& sha, TokenId t) {
  const auto u = static_cast<uint32_t>(t);
  const uint8_t bytes[4] = {static_cast<uint8_t>(u), static_cast<uint8_t>(u >> 8),
                            static_cast<uint8_t>(u >> 16), static_cast<uint8_t>(u >> 24)};
  sha.update(std::span<const uint8_t>(bytes, 4));
}

}  // namespace

BlockKey chain_block_key(const BlockKey& parent, const NamespaceDigest& ns,
                         std::span<const TokenId> block_tokens) {
  Sha256 sha = chain_hasher(parent, ns);
  for (TokenId t : block_tokens) hash_token(sha, t);
  return sha.finish();
}

std::vector<BlockKey> partial_block_keys(const BlockKey& parent, const NamespaceDigest& ns,
                                         std::span<const TokenId> tokens) {
  std::vector<BlockKey> keys;
  keys.reserve(tokens.size());
  Sha256 sha = chain_hasher(parent, ns);
  for (TokenId t : tokens) {
    hash_token(sha, t);
    Sha256 done = sha;  // finish() spends its object: the running state goes on
    keys.push_back(done.finish());
  }
  return keys;
}

std::vector<BlockKey> chain_block_keys(const NamespaceDigest& ns, std::span<const TokenId> tokens,
                                       int32_t block_size, int32_t n_blocks) {
  assert(block_size > 0 && static_cast<int64_t>(n_blocks) * block_size <= std::ssize(tokens));
  std::vector<BlockKey> keys;
  keys.reserve(static_cast<size_t>(n_blocks));
  BlockKey parent = kRootBlockKey;
  for (int32_t j = 0; j < n_blocks; ++j) {
    parent =
        chain_block_key(parent, ns,
                        tokens.subspan(static_cast<size_t>(j) * static_cast<size_t>(block_size),
                                       static_cast<size_t>(block_size)));
    keys.push_back(parent);
  }
  return keys;
}

std::string block_key_hex(const BlockKey& key) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex(64, '0');
  for (size_t i = 0; i < key.size(); ++i) {
    hex[2 * i] = kHex[key[i] >> 4];
    hex[2 * i + 1] = kHex[key[i] & 15];
  }
  return hex;
}

}  // namespace trellis
