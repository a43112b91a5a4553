// A bounded pool of n-grams seen across requests, each with the tokens that followed it the last
// time: speculative drafts for text that repeats between requests (an agent's repeated tool call,
// a template's boilerplate) even when the prefix cache holds no path to it. Prompt lookup
// (prompt_lookup.h) covers repeats within one request.
//
//   add([... a b c d e f ...])  ->  pool[a b c] = d e f ... (continuation_tokens at most)
//   draft([... x a b c])        ->  d e f ...
//
// Bounded: when max_entries n-grams are held, adding a new one drops the least recently added
// or used (a draft counts as a use). Not thread-safe: one owner (the engine loop).
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/token_id.h"

namespace trellis {

struct NgramPoolConfig {
  int32_t n = 3;                    // tokens of context an entry is keyed by
  int32_t continuation_tokens = 8;  // tokens kept after each n-gram
  int64_t max_entries = 1 << 16;
};

class NgramPool {
 public:
  explicit NgramPool(NgramPoolConfig config = {}) : config_(config) {}

  // Indexes every n-gram of `tokens` that has a token after it, with what follows (a later
  // occurrence replaces an earlier one's continuation).
  void add(std::span<const TokenId> tokens);
  // What followed `history`'s last n tokens, at most max_tokens, into `draft` (its capacity
  // reused); empty when unknown.
  void draft(std::span<const TokenId> history, int32_t max_tokens, std::vector<TokenId>& draft);

  int64_t size() const { return static_cast<int64_t>(entries_.size()); }

 private:
  struct Entry {
    std::vector<TokenId> key;
    std::vector<TokenId> continuation;
  };
  using Lru = std::list<Entry>;  // most recently added or used first

  static uint64_t hash(std::span<const TokenId> key);
  Lru::iterator find(std::span<const TokenId> key);

  NgramPoolConfig config_;
  Lru lru_;
  std::unordered_multimap<uint64_t, Lru::iterator> entries_;
};

}  // namespace trellis
