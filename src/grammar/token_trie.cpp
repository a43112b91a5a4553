#include "grammar/token_trie.h"

#include <algorithm>
#include <numeric>

namespace trellis {

TokenTrie::TokenTrie(std::span<const std::string_view> pieces)
    : vocab_size_(static_cast<int32_t>(pieces.size())) {
  piece_offsets_.reserve(pieces.size() + 1);
  for (std::string_view piece : pieces) {
    piece_offsets_.push_back(static_cast<uint32_t>(piece_bytes_.size()));
    piece_bytes_ += piece;
  }
  piece_offsets_.push_back(static_cast<uint32_t>(piece_bytes_.size()));
  std::vector<TokenId> order(pieces.size());
  std::iota(order.begin(), order.end(), 0);
  order.erase(std::remove_if(order.begin(), order.end(),
                             [&](TokenId id) { return pieces[static_cast<size_t>(id)].empty(); }),
              order.end());
  // Byte order (unsigned), ties by id: the depth-first order of the trie.
  std::sort(order.begin(), order.end(), [&](TokenId a, TokenId b) {
    const std::string_view x = pieces[static_cast<size_t>(a)], y = pieces[static_cast<size_t>(b)];
    const int c = x.compare(y);  // char_traits<char>::compare compares as unsigned char
    return c != 0 ? c < 0 : a < b;
  });

  // Walk the sorted pieces; `path[d]` is the node of depth d + 1 on the current path.
  std::vector<uint32_t> path;
  std::string_view previous;
  for (TokenId id : order) {
    const std::string_view piece = pieces[static_cast<size_t>(id)];
    size_t common = 0;
    while (common < previous.size() && common < piece.size() && common < path.size() &&
           previous[common] == piece[common])
      ++common;
    // Nodes leaving the path end their subtrees here.
    for (size_t d = common; d < path.size(); ++d)
      nodes_[path[d]].subtree_end = uint32_t(nodes_.size());
    path.resize(common);
    for (size_t d = common; d < piece.size(); ++d) {
      path.push_back(static_cast<uint32_t>(nodes_.size()));
      nodes_.push_back({0, static_cast<uint32_t>(token_ids_.size()), static_cast<uint16_t>(d + 1),
                        static_cast<uint8_t>(piece[d])});
    }
    token_ids_.push_back(id);  // the last node on the path is this piece's node
    max_depth_ = std::max(max_depth_, static_cast<int>(piece.size()));
    previous = piece;
  }
  for (uint32_t node : path) nodes_[node].subtree_end = static_cast<uint32_t>(nodes_.size());
  nodes_.push_back(
      {static_cast<uint32_t>(nodes_.size() + 1), static_cast<uint32_t>(token_ids_.size()), 0, 0});
}

std::pair<TokenId, size_t> TokenTrie::longest_prefix(std::string_view text) const {
  std::pair<TokenId, size_t> best{kNoToken, 0};
  // Descend: the children of node i are the nodes of depth + 1 in (i, subtree_end), each
  // followed by its own subtree.
  size_t begin = 0, end = n_nodes();
  for (size_t depth = 0; depth < text.size(); ++depth) {
    const auto byte = static_cast<uint8_t>(text[depth]);
    size_t child = begin;
    while (child < end && nodes_[child].byte != byte) child = nodes_[child].subtree_end;
    if (child >= end) break;
    if (nodes_[child].tokens_begin < nodes_[child + 1].tokens_begin)
      best = {token_ids_[nodes_[child].tokens_begin], depth + 1};
    begin = child + 1;
    end = nodes_[child].subtree_end;
  }
  return best;
}

}  // namespace trellis
