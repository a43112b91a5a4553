// The evictable set of the radix tree: its unlocked leaves, least recently used first.
//
// Kept up to date incrementally by the tree (a leaf enters when it is created unlocked, when its
// last lock goes, or when its last child is evicted; it leaves when it gains a child or a lock or
// is evicted; a touch re-keys it). O(log n) per change; the tree never rescans itself.
#pragma once

#include <cstdint>
#include <map>

namespace trellis {

struct PrefixNode;

struct LeafKey {
  uint64_t last_access = 0;  // logical clock value of the node's last touch
  int32_t end = 0;           // token position just past the node's edge (its depth)
  uint64_t id = 0;           // creation order, unique within a tree
};

// Eviction order (tie-break order):
//   1. smaller last_access first (least recently used);
//   2. on equal last_access, larger end first (the deeper node; a parent is touched whenever a
//      child is, so a parent's last_access is never older than its children's and it sorts after
//      them);
//   3. on equal last_access and end, smaller id first (created earlier).
// Each tick touches one path, which ends in at most one leaf, so two live leaves rarely share a
// last_access (a parent that becomes a leaf inherits its last child's tick); the order is total
// regardless, so eviction is deterministic.
struct LeafKeyLess {
  bool operator()(const LeafKey& a, const LeafKey& b) const {
    if (a.last_access != b.last_access) return a.last_access < b.last_access;
    if (a.end != b.end) return a.end > b.end;
    return a.id < b.id;
  }
};

using LeafLru = std::map<LeafKey, PrefixNode*, LeafKeyLess>;

}  // namespace trellis
