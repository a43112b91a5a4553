// A router's picture of one replica's prefix cache: a radix tree over the text of the prompts sent
// to it (an approximation: the replica may since have evicted them, and it caches tokens, not
// characters). match() says how many leading bytes of a prompt the replica has probably cached;
// the tree holds at most a byte budget, evicting its least recently used leaves.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace trellis {

class TextTree {
 public:
  explicit TextTree(size_t max_bytes) : max_bytes_(max_bytes) {}

  // The length of the longest prefix of `text` in the tree; touches the path it follows.
  size_t match(std::string_view text);
  // Adds `text` (then evicts down to the budget, never the path just added unless it alone is
  // over budget, when it is cut to fit).
  void insert(std::string_view text);
  // Bytes held on the tree's edges.
  size_t size_bytes() const { return size_bytes_; }
  size_t n_nodes() const { return n_nodes_; }

 private:
  struct Node {
    std::string edge;  // the bytes from the parent to this node
    Node* parent = nullptr;
    std::map<char, std::unique_ptr<Node>> children;  // keyed by their edge's first byte
    uint64_t last_access = 0;
  };
  // Follows `text` from the root; returns the last node fully matched and the matched length.
  size_t walk(std::string_view text, bool touch);
  void evict_to_budget(const Node* keep);
  void remove_leaf(Node* leaf);

  size_t max_bytes_;
  Node root_;
  size_t size_bytes_ = 0;
  size_t n_nodes_ = 0;
  uint64_t clock_ = 0;
};

}  // namespace trellis
