// The vocabulary as a byte trie flattened in depth-first order: the tokens a grammar state allows
// are found in one pass over the nodes that skips a whole subtree at the first byte the grammar
// refuses (every token spelled with that prefix is refused with it).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/token_id.h"

namespace trellis {

class TokenTrie {
 public:
  struct Node {
    uint32_t subtree_end;   // index of the first node after this node's subtree
    uint32_t tokens_begin;  // this node's tokens are token_ids()[tokens_begin, next node's)
    uint16_t depth;         // 1 for a token's first byte
    uint8_t byte;
  };

  // pieces[id]: the bytes token `id` stands for. An empty piece (a control token) is in no node:
  // a grammar never produces it.
  explicit TokenTrie(std::span<const std::string_view> pieces);

  int32_t vocab_size() const { return vocab_size_; }
  // The token with the longest piece that is a prefix of `text` (ties: the lowest id), and that
  // piece's length; {kNoToken, 0} when no piece is.
  std::pair<TokenId, size_t> longest_prefix(std::string_view text) const;
  // The bytes of token `id` (empty for a control token).
  std::string_view piece(TokenId id) const {
    const auto i = static_cast<size_t>(id);
    return std::string_view(piece_bytes_)
        .substr(piece_offsets_[i], piece_offsets_[i + 1] - piece_offsets_[i]);
  }
  // In depth-first order, children by byte value; one sentinel node at the end (depth 0).
  const std::vector<Node>& nodes() const { return nodes_; }
  size_t n_nodes() const { return nodes_.size() - 1; }
  const std::vector<TokenId>& token_ids() const { return token_ids_; }
  int max_depth() const { return max_depth_; }

 private:
  int32_t vocab_size_ = 0;
  int max_depth_ = 0;
  std::vector<Node> nodes_;
  std::vector<TokenId> token_ids_;
  std::string piece_bytes_;              // every piece, in id order
  std::vector<uint32_t> piece_offsets_;  // [vocab + 1]
};

}  // namespace trellis
