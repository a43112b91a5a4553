#include "prefix/radix_tree.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <unordered_map>
#include <utility>

namespace trellis {

namespace {
constexpr BlockId kNoBlock = -1;
}  // namespace

struct PrefixNode {
  PrefixNode* parent = nullptr;     // null for a namespace root
  const std::string* ns = nullptr;  // the namespace (key of the tree's root map)
  std::vector<TokenId> tokens;      // the edge: positions [start, start + tokens.size())
  int32_t start = 0;
  std::vector<BlockId> blocks;  // full blocks of indices [start / B, end / B)
  BlockId tail = kNoBlock;      // block end / B, slots [0, end % B); iff end % B != 0
  std::unordered_map<TokenId, std::unique_ptr<PrefixNode>> children;  // keyed by first token
  int32_t lock_count = 0;    // locks on this node or a descendant
  uint64_t last_access = 0;  // never older than any child's
  uint64_t id = 0;
  bool in_lru = false;  // iff non-root leaf with lock_count == 0
  LeafKey lru_key;      // the key it is filed under while in_lru

  int32_t end() const { return start + static_cast<int32_t>(tokens.size()); }
  bool is_root() const { return parent == nullptr; }
  LeafKey key() const { return LeafKey{last_access, end(), id}; }
};

// --- PrefixLock -------------------------------------------------------------------------------

PrefixLock& PrefixLock::operator=(PrefixLock&& other) noexcept {
  if (this != &other) {
    reset();
    tree_ = other.tree_;
    node_ = other.node_;
    other.tree_ = nullptr;
    other.node_ = nullptr;
  }
  return *this;
}

void PrefixLock::reset() {
  if (node_ != nullptr) tree_->unlock(node_);
  tree_ = nullptr;
  node_ = nullptr;
}

// --- RadixTree --------------------------------------------------------------------------------

RadixTree::RadixTree(BlockPool& pool, RadixTreeConfig config) : pool_(pool), config_(config) {
  assert(config_.block_size > 0);
}

RadixTree::~RadixTree() {
  std::vector<PrefixNode*> stack;
  for (auto& [name, root] : roots_) {
    assert(root->lock_count == 0 && "a PrefixLock outlives its tree");
    stack.push_back(root.get());
  }
  while (!stack.empty()) {
    PrefixNode* node = stack.back();
    stack.pop_back();
    drop_blocks(node);
    for (auto& [token, child] : node->children) stack.push_back(child.get());
  }
}

void RadixTree::continuation(std::string_view ns, std::span<const TokenId> tokens,
                             int32_t max_tokens, std::vector<TokenId>& out) const {
  out.clear();
  const auto root_it = roots_.find(ns);
  if (root_it == roots_.end() || max_tokens <= 0) return;
  // Down the path of `tokens`: `node` holds the last matched token at edge offset `k` (the root
  // with k = 0 while nothing is matched).
  const PrefixNode* node = root_it->second.get();
  size_t k = 0;
  size_t n = 0;
  while (n < tokens.size()) {
    if (k == node->tokens.size()) {
      const auto it = node->children.find(tokens[n]);
      if (it == node->children.end()) return;
      node = it->second.get();
      k = 0;
    }
    if (node->tokens[k] != tokens[n]) return;
    ++k;
    ++n;
  }
  // The rest of this edge, then the most recently used child, until max_tokens.
  for (;;) {
    for (; k < node->tokens.size(); ++k) {
      if (static_cast<int32_t>(out.size()) == max_tokens) return;
      out.push_back(node->tokens[k]);
    }
    const PrefixNode* next = nullptr;
    for (const auto& [first, child] : node->children) {
      if (next == nullptr || child->last_access > next->last_access ||
          (child->last_access == next->last_access && first < next->tokens.front())) {
        next = child.get();
      }
    }
    if (next == nullptr) return;
    node = next;
    k = 0;
  }
}

PrefixMatch RadixTree::match_prefix(std::string_view ns, std::span<const TokenId> tokens,
                                    int32_t max_tokens) const {
  PrefixMatch match;
  const auto root_it = roots_.find(ns);
  if (root_it == roots_.end()) return match;
  const int32_t B = config_.block_size;
  const int32_t limit =
      std::clamp(max_tokens, 0, static_cast<int32_t>(std::min<size_t>(tokens.size(), INT32_MAX)));

  // Pass 1: the longest common prefix, at most `limit` tokens.
  //   path   [0 ............. start) [start ...... start+k) [... end)
  //           matched by ancestors    matched in this edge    not matched
  int32_t n = 0;
  const PrefixNode* node = root_it->second.get();
  while (n < limit) {
    const auto it = node->children.find(tokens[static_cast<size_t>(n)]);
    if (it == node->children.end()) break;
    const PrefixNode* child = it->second.get();
    const int32_t edge = static_cast<int32_t>(child->tokens.size());
    const int32_t k_max = std::min(edge, limit - n);
    int32_t k = 1;  // the first token matched through the child map
    while (k < k_max && child->tokens[static_cast<size_t>(k)] == tokens[static_cast<size_t>(n + k)])
      ++k;
    n += k;
    if (k < edge) break;
    node = child;
  }
  if (config_.mode == MatchMode::BLOCK) n = n / B * B;
  if (n == 0) return match;

  match.n_tokens = n;
  match.n_full_blocks = n / B;
  match.n_partial_slots = n % B;
  match.blocks.reserve(static_cast<size_t>((n + B - 1) / B));

  // Pass 2: the blocks of positions [0, n). Nodes ending before n contribute all their full
  // blocks; the node holding n - 1 contributes its full blocks below index n / B and, when n % B
  // != 0, the block of index n / B (a full one of its own, or its tail).
  node = root_it->second.get();
  int32_t pos = 0;
  for (;;) {
    PrefixNode* child = node->children.find(tokens[static_cast<size_t>(pos)])->second.get();
    const int32_t first_j = child->start / B;
    if (child->end() < n) {
      match.blocks.insert(match.blocks.end(), child->blocks.begin(), child->blocks.end());
      pos = child->end();
      node = child;
      continue;
    }
    const int32_t n_own = n / B - first_j;
    match.blocks.insert(match.blocks.end(), child->blocks.begin(), child->blocks.begin() + n_own);
    if (match.n_partial_slots > 0) {
      const int32_t j = n / B;
      match.blocks.push_back(j < child->end() / B ? child->blocks[static_cast<size_t>(j - first_j)]
                                                  : child->tail);
    }
    match.node = child;
    break;
  }
  return match;
}

PrefixLock RadixTree::lock(const PrefixMatch& match) {
  PrefixNode* node = match.node;
  if (node == nullptr) return PrefixLock();
  if (node->end() > match.n_tokens) node = split(node, match.n_tokens - node->start);
  share_tails_along(node);
  return lock(node);
}

void RadixTree::share_tails_along(PrefixNode* node) {
  const int32_t B = config_.block_size;
  for (PrefixNode* child = node; child->parent != nullptr; child = child->parent) {
    PrefixNode* parent = child->parent;
    if (parent->end() % B == 0) continue;  // no tail (the roots end at 0)
    // The child's version of block index parent->end() / B holds the parent's last tokens too.
    const BlockId on_path = child->blocks.empty() ? child->tail : child->blocks.front();
    if (parent->tail == on_path) continue;
    pool_.cache_swap(parent->tail, on_path);
    parent->tail = on_path;
  }
}

PrefixLock RadixTree::lock(PrefixNode* node) {
  if (node == nullptr) return PrefixLock();
  const uint64_t tick = ++clock_;
  for (PrefixNode* n = node; n != nullptr; n = n->parent) {
    touch(n, tick);
    ++n->lock_count;
    update_lru(n);
  }
  return PrefixLock(this, node);
}

void RadixTree::unlock(PrefixNode* node) {
  for (PrefixNode* n = node; n != nullptr; n = n->parent) {
    assert(n->lock_count > 0);
    --n->lock_count;
    update_lru(n);
  }
}

PrefixNode* RadixTree::root_for(std::string_view ns) {
  auto it = roots_.find(ns);
  if (it == roots_.end()) {
    auto root = std::make_unique<PrefixNode>();
    root->id = next_id_++;
    it = roots_.emplace(std::string(ns), std::move(root)).first;
    it->second->ns = &it->first;
  }
  return it->second.get();
}

// Re-filing a leaf under its new key moves its map node (extract, then insert the handle): a touch
// allocates nothing.
void RadixTree::touch(PrefixNode* node, uint64_t tick) {
  node->last_access = tick;
  if (!node->in_lru) return;
  LeafLru::node_type handle = lru_.extract(node->lru_key);
  node->lru_key = node->key();
  handle.key() = node->lru_key;
  lru_.insert(std::move(handle));
}

// A node leaving the set keeps its map node as spare_lru_node_ for the next one to enter, so the
// usual hand-over (an insert makes a leaf the parent of a new leaf) allocates nothing either.
void RadixTree::update_lru(PrefixNode* node) {
  const bool evictable = !node->is_root() && node->children.empty() && node->lock_count == 0;
  if (evictable == node->in_lru) return;
  if (evictable) {
    node->lru_key = node->key();
    if (spare_lru_node_.empty()) {
      lru_.emplace(node->lru_key, node);
    } else {
      spare_lru_node_.key() = node->lru_key;
      spare_lru_node_.mapped() = node;
      lru_.insert(std::move(spare_lru_node_));
      spare_lru_node_ = LeafLru::node_type();
    }
  } else {
    spare_lru_node_ = lru_.extract(node->lru_key);
  }
  node->in_lru = evictable;
}

// Splits `node` = [s, e) into a new parent [s, s + n_head_tokens) and `node` = [s + n_head, e).
//
//   s            p = s + n_head          e
//   | new parent | node                  |
//   blocks of indices [s/B, p/B) move to the parent; when p % B != 0 the parent's tail is the
//   node's block of index p/B (shared: one more tree reference).
PrefixNode* RadixTree::split(PrefixNode* node, int32_t n_head_tokens) {
  assert(n_head_tokens > 0 && n_head_tokens < static_cast<int32_t>(node->tokens.size()));
  const int32_t B = config_.block_size;
  auto head = std::make_unique<PrefixNode>();
  PrefixNode* h = head.get();
  h->parent = node->parent;
  h->ns = node->ns;
  h->start = node->start;
  h->tokens.assign(node->tokens.begin(), node->tokens.begin() + n_head_tokens);
  node->tokens.erase(node->tokens.begin(), node->tokens.begin() + n_head_tokens);
  node->start += n_head_tokens;
  const int32_t p = node->start;
  const int32_t n_head_blocks = p / B - h->start / B;
  h->blocks.assign(node->blocks.begin(), node->blocks.begin() + n_head_blocks);
  node->blocks.erase(node->blocks.begin(), node->blocks.begin() + n_head_blocks);
  if (p % B != 0) {
    h->tail = node->blocks.empty() ? node->tail : node->blocks.front();
    pool_.cache_retain(h->tail);
  }
  h->lock_count = node->lock_count;
  h->last_access = node->last_access;
  h->id = next_id_++;
  ++n_nodes_;

  // Re-link: the grandparent's entry (same first token) now owns the head, the head owns node.
  std::unique_ptr<PrefixNode>& slot = node->parent->children.find(h->tokens.front())->second;
  NodePtr owned_node = std::move(slot);
  slot = std::move(head);
  node->parent = h;
  h->children.emplace(node->tokens.front(), std::move(owned_node));
  return h;
}

InsertResult RadixTree::insert(std::string_view ns, std::span<const TokenId> tokens,
                               std::span<const BlockId> blocks) {
  const int32_t B = config_.block_size;
  const int32_t n_given = static_cast<int32_t>(tokens.size());
  assert(static_cast<int64_t>(blocks.size()) == (static_cast<int64_t>(n_given) + B - 1) / B);
  const int32_t n_cache = config_.mode == MatchMode::BLOCK ? n_given / B * B : n_given;
  InsertResult result;
  result.n_not_taken = static_cast<int32_t>(blocks.size());
  if (n_cache == 0) return result;

  const uint64_t tick = ++clock_;
  PrefixNode* node = root_for(ns);
  touch(node, tick);
  int32_t n = 0;
  while (n < n_cache) {
    const auto it = node->children.find(tokens[static_cast<size_t>(n)]);
    if (it == node->children.end()) {
      // A new leaf [n, n_cache) takes the caller's blocks of indices [n / B, n_cache / B) and
      // the partial last one.
      auto leaf = std::make_unique<PrefixNode>();
      PrefixNode* l = leaf.get();
      l->parent = node;
      l->ns = node->ns;
      l->start = n;
      l->tokens.assign(tokens.begin() + n, tokens.begin() + n_cache);
      l->blocks.assign(blocks.begin() + n / B, blocks.begin() + n_cache / B);
      if (n_cache % B != 0) l->tail = blocks[static_cast<size_t>(n_cache / B)];
      for (BlockId b : l->blocks) {
        assert(pool_.tree_refs(b) == 0 && "insert was given a block the tree indexes elsewhere");
        pool_.cache_retain(b);
      }
      if (l->tail != kNoBlock) {
        assert(pool_.tree_refs(l->tail) == 0);
        pool_.cache_retain(l->tail);
      }
      result.n_taken = static_cast<int32_t>(l->blocks.size()) + (l->tail != kNoBlock ? 1 : 0);
      result.n_not_taken -= result.n_taken;
      l->last_access = tick;
      l->id = next_id_++;
      ++n_nodes_;
      // A new leaf; the node it hangs under stops being one (roots are never counted).
      if (node->is_root() || !node->children.empty()) ++n_leaves_;
      node->children.emplace(l->tokens.front(), std::move(leaf));
      update_lru(node);
      update_lru(l);
      break;
    }
    PrefixNode* child = it->second.get();
    const int32_t edge = static_cast<int32_t>(child->tokens.size());
    const int32_t k_max = std::min(edge, n_cache - n);
    int32_t k = 1;
    while (k < k_max && child->tokens[static_cast<size_t>(k)] == tokens[static_cast<size_t>(n + k)])
      ++k;
    // Diverging inside the edge (k < edge) with tokens left: split, then add a sibling leaf.
    // Ending inside the edge (n + k == n_cache): the positions are all cached already.
    if (k < edge && n + k < n_cache) child = split(child, k);
    touch(child, tick);
    n += k;
    node = child;
  }
  return result;
}

bool RadixTree::held_by_request(const PrefixNode* node) const {
  for (BlockId b : node->blocks)
    if (pool_.request_refs(b) > 0) return true;
  return node->tail != kNoBlock && pool_.request_refs(node->tail) > 0;
}

int32_t RadixTree::drop_blocks(PrefixNode* node) {
  int32_t n_freed = 0;
  for (BlockId b : node->blocks) n_freed += pool_.cache_release(b) ? 1 : 0;
  if (node->tail != kNoBlock) n_freed += pool_.cache_release(node->tail) ? 1 : 0;
  node->blocks.clear();
  node->tail = kNoBlock;
  return n_freed;
}

int32_t RadixTree::evict(int32_t n_blocks, const EvictObserver& observer) {
  int32_t n_freed = 0;
  std::vector<TokenId> path;    // for the observer only
  std::vector<BlockId> blocks;  // for the observer only
  auto it = lru_.begin();
  while (n_freed < n_blocks && it != lru_.end()) {
    PrefixNode* node = it->second;
    if (held_by_request(node)) {
      ++it;  // stays evictable for later; nodes before `it` are all held
      continue;
    }
    const LeafKey key = it->first;
    lru_.erase(it);
    node->in_lru = false;
    if (observer) {
      path.clear();
      for (const PrefixNode* n = node; !n->is_root(); n = n->parent)
        path.insert(path.begin(), n->tokens.begin(), n->tokens.end());
      blocks = node->blocks;
      if (node->tail != kNoBlock) blocks.push_back(node->tail);
    }
    const int32_t freed_here = drop_blocks(node);
    n_freed += freed_here;
    if (observer) observer(EvictedNode{*node->ns, path, node->start, blocks, freed_here});
    PrefixNode* parent = node->parent;
    parent->children.erase(node->tokens.front());  // destroys `node`
    --n_nodes_;
    // One leaf gone; its parent becomes one when it was the last child.
    if (parent->is_root() || !parent->children.empty()) --n_leaves_;
    if (parent->is_root() && parent->children.empty()) {
      roots_.erase(roots_.find(*parent->ns));  // an empty namespace keeps no root
    } else {
      update_lru(parent);
    }
    // The parent, if it became evictable, sorts after `key` (its last_access is not older and it
    // is shallower), so resuming after `key` sees it in order.
    it = lru_.upper_bound(key);
  }
  return n_freed;
}

int32_t RadixTree::flush(const EvictObserver& observer) {
  return evict(std::numeric_limits<int32_t>::max(), observer);
}

int32_t RadixTree::count_evictable_blocks() const {
  // A node is eventually evictable iff it is unlocked and no block in its subtree is held by a
  // request. A block is freed iff all its tree slots are in such nodes and no request holds it.
  std::unordered_map<BlockId, int32_t> evictable_slots;
  // Post-order walk: returns whether the subtree is entirely evictable.
  std::function<bool(const PrefixNode*)> visit = [&](const PrefixNode* node) -> bool {
    bool all = true;
    for (const auto& [token, child] : node->children) all = visit(child.get()) && all;
    if (node->is_root() || !all || node->lock_count > 0 || held_by_request(node)) return false;
    for (BlockId b : node->blocks) ++evictable_slots[b];
    if (node->tail != kNoBlock) ++evictable_slots[node->tail];
    return true;
  };
  for (const auto& [name, root] : roots_) visit(root.get());
  int32_t n = 0;
  for (const auto& [b, slots] : evictable_slots) n += slots == pool_.tree_refs(b) ? 1 : 0;
  return n;
}

Status RadixTree::check_invariants() const {
  TRELLIS_TRY(pool_.check_invariants());
  const int32_t B = config_.block_size;
  struct BlockUse {
    int32_t slots = 0;
    int32_t index = -1;
  };
  std::unordered_map<BlockId, BlockUse> uses;
  int64_t n_nodes = 0;
  int64_t n_leaves = 0;
  size_t n_in_lru = 0;
  auto fail = [](const PrefixNode* node, const std::string& what) {
    return Error{"radix tree: node [" + std::to_string(node->start) + "," +
                 std::to_string(node->end()) + ") of namespace \"" + *node->ns + "\": " + what};
  };
  auto use = [&](const PrefixNode* node, BlockId b, int32_t j) -> Status {
    if (b < 0 || b >= pool_.n_total()) return fail(node, "invalid block " + std::to_string(b));
    BlockUse& u = uses[b];
    if (u.slots > 0 && u.index != j) {
      return fail(node, "block " + std::to_string(b) + " is at index " + std::to_string(j) +
                            " and at index " + std::to_string(u.index));
    }
    ++u.slots;
    u.index = j;
    return {};
  };
  std::vector<const PrefixNode*> stack;
  for (const auto& [name, root] : roots_) {
    const PrefixNode* r = root.get();
    if (r->parent != nullptr || !r->tokens.empty() || !r->blocks.empty() || r->tail != kNoBlock ||
        r->ns != &name || r->in_lru)
      return fail(r, "malformed namespace root");
    if (r->children.empty()) return fail(r, "an empty namespace keeps its root");
    stack.push_back(r);
  }
  while (!stack.empty()) {
    const PrefixNode* node = stack.back();
    stack.pop_back();
    int32_t child_locks = 0;
    for (const auto& [token, child] : node->children) {
      const PrefixNode* c = child.get();
      if (c->parent != node || c->ns != node->ns || c->tokens.empty() || c->tokens.front() != token)
        return fail(c, "wrongly linked to its parent");
      if (c->start != node->end()) return fail(c, "does not start where its parent ends");
      if (c->last_access > node->last_access) return fail(c, "touched after its parent");
      child_locks += c->lock_count;
      stack.push_back(c);
    }
    if (node->lock_count < child_locks) return fail(node, "lock count below its children's");
    const bool evictable = !node->is_root() && node->children.empty() && node->lock_count == 0;
    if (node->in_lru != evictable) return fail(node, "evictable set membership is stale");
    if (node->in_lru) {
      ++n_in_lru;
      const auto it = lru_.find(node->lru_key);
      if (it == lru_.end() || it->second != node ||
          node->lru_key.last_access != node->last_access || node->lru_key.end != node->end() ||
          node->lru_key.id != node->id)
        return fail(node, "evictable set key is stale");
    }
    if (node->is_root()) continue;
    ++n_nodes;
    if (node->children.empty()) ++n_leaves;
    const int32_t first_j = node->start / B;
    if (static_cast<int32_t>(node->blocks.size()) != node->end() / B - first_j)
      return fail(node, "holds " + std::to_string(node->blocks.size()) + " full blocks");
    if ((node->tail != kNoBlock) != (node->end() % B != 0))
      return fail(node, "has a tail block iff it ends inside a block: violated");
    for (size_t i = 0; i < node->blocks.size(); ++i)
      TRELLIS_TRY(use(node, node->blocks[i], first_j + static_cast<int32_t>(i)));
    if (node->tail != kNoBlock) TRELLIS_TRY(use(node, node->tail, node->end() / B));
  }
  if (n_nodes != n_nodes_) return Error{"radix tree: node count is stale"};
  if (n_leaves != n_leaves_) return Error{"radix tree: leaf count is stale"};
  if (n_in_lru != lru_.size()) return Error{"radix tree: the evictable set holds removed nodes"};
  for (const auto& [b, u] : uses) {
    if (pool_.tree_refs(b) != u.slots) {
      return Error{"radix tree: block " + std::to_string(b) + " is in " + std::to_string(u.slots) +
                   " tree slots but the pool counts " + std::to_string(pool_.tree_refs(b))};
    }
  }
  if (static_cast<int32_t>(uses.size()) != pool_.n_cached())
    return Error{"radix tree: the pool counts cached blocks the tree does not index"};
  return {};
}

std::string RadixTree::debug_string() const {
  std::string out;
  std::function<void(const PrefixNode*, int)> visit = [&](const PrefixNode* node, int depth) {
    if (!node->is_root()) {
      out.append(static_cast<size_t>(2 * depth), ' ');
      out += '[';
      out += std::to_string(node->start);
      out += ',';
      out += std::to_string(node->end());
      out += ") ";
      for (size_t i = 0; i < node->tokens.size(); ++i) {
        if (i > 0) out += ',';
        out += std::to_string(node->tokens[i]);
      }
      if (!node->blocks.empty()) out += " blocks=";
      for (size_t i = 0; i < node->blocks.size(); ++i) {
        if (i > 0) out += ',';
        out += std::to_string(node->blocks[i]);
      }
      if (node->tail != kNoBlock) out += " tail=" + std::to_string(node->tail);
      if (node->lock_count > 0) out += " lock=" + std::to_string(node->lock_count);
      out += "\n";
    }
    std::vector<TokenId> keys;
    for (const auto& [token, child] : node->children) keys.push_back(token);
    std::sort(keys.begin(), keys.end());
    for (TokenId t : keys) visit(node->children.at(t).get(), depth + 1);
  };
  for (const auto& [name, root] : roots_) {
    out += "ns \"" + name + "\":\n";
    visit(root.get(), 0);
  }
  return out;
}

}  // namespace trellis
