#include "router/text_tree.h"

#include <algorithm>
#include <vector>

namespace trellis {

size_t TextTree::walk(std::string_view text, bool touch) {
  const uint64_t now = ++clock_;
  Node* node = &root_;
  size_t matched = 0;
  while (matched < text.size()) {
    auto it = node->children.find(text[matched]);
    if (it == node->children.end()) break;
    Node* child = it->second.get();
    const std::string& edge = child->edge;
    size_t common = 0;
    while (common < edge.size() && matched + common < text.size() &&
           edge[common] == text[matched + common])
      ++common;
    matched += common;
    if (touch) child->last_access = now;
    if (common < edge.size()) break;
    node = child;
  }
  return matched;
}

size_t TextTree::match(std::string_view text) {
  return walk(text, /*touch=*/true);
}

void TextTree::insert(std::string_view text) {
  // Cut to the budget first: a prompt longer than the whole tree keeps its start.
  text = text.substr(0, std::min(text.size(), max_bytes_));
  const uint64_t now = ++clock_;
  Node* node = &root_;
  size_t at = 0;
  while (at < text.size()) {
    auto it = node->children.find(text[at]);
    if (it == node->children.end()) {
      auto leaf = std::make_unique<Node>();
      leaf->edge = std::string(text.substr(at));
      leaf->parent = node;
      leaf->last_access = now;
      size_bytes_ += leaf->edge.size();
      ++n_nodes_;
      node = leaf.get();
      node->parent->children.emplace(node->edge[0], std::move(leaf));
      break;
    }
    Node* child = it->second.get();
    size_t common = 0;
    while (common < child->edge.size() && at + common < text.size() &&
           child->edge[common] == text[at + common])
      ++common;
    child->last_access = now;
    if (common < child->edge.size()) {
      // Split the edge: a new middle node holds the common part.
      auto middle = std::make_unique<Node>();
      middle->edge = child->edge.substr(0, common);
      middle->parent = node;
      middle->last_access = now;
      std::unique_ptr<Node> moved = std::move(it->second);
      moved->edge.erase(0, common);
      moved->parent = middle.get();
      middle->children.emplace(moved->edge[0], std::move(moved));
      Node* m = middle.get();
      it->second = std::move(middle);
      ++n_nodes_;
      child = m;
    }
    at += common;
    node = child;
  }
  evict_to_budget(node);
}

void TextTree::evict_to_budget(const Node* keep) {
  if (size_bytes_ <= max_bytes_) return;
  // Leaves, least recently used first; evicting one may turn its parent into a leaf, so repeat.
  while (size_bytes_ > max_bytes_) {
    std::vector<Node*> leaves;
    std::vector<Node*> stack{&root_};
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      if (n != &root_ && n->children.empty() && n != keep) leaves.push_back(n);
      for (auto& [key, child] : n->children) stack.push_back(child.get());
    }
    if (leaves.empty()) return;  // only the path just added is left
    std::sort(leaves.begin(), leaves.end(),
              [](const Node* a, const Node* b) { return a->last_access < b->last_access; });
    for (Node* leaf : leaves) {
      if (size_bytes_ <= max_bytes_) break;
      remove_leaf(leaf);
    }
  }
}

void TextTree::remove_leaf(Node* leaf) {
  size_bytes_ -= leaf->edge.size();
  --n_nodes_;
  Node* parent = leaf->parent;
  parent->children.erase(leaf->edge[0]);
}

}  // namespace trellis
