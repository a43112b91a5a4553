#include "spec/ngram_pool.h"

#include <algorithm>

namespace trellis {

uint64_t NgramPool::hash(std::span<const TokenId> key) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the token values
  for (TokenId t : key) {
    h ^= static_cast<uint64_t>(static_cast<uint32_t>(t));
    h *= 0x100000001b3ull;
  }
  return h;
}

NgramPool::Lru::iterator NgramPool::find(std::span<const TokenId> key) {
  const auto [begin, end] = entries_.equal_range(hash(key));
  for (auto it = begin; it != end; ++it) {
    if (std::equal(key.begin(), key.end(), it->second->key.begin(), it->second->key.end()))
      return it->second;
  }
  return lru_.end();
}

void NgramPool::add(std::span<const TokenId> tokens) {
  const auto n = static_cast<size_t>(config_.n);
  if (config_.max_entries <= 0 || tokens.size() <= n) return;
  for (size_t start = 0; start + n < tokens.size(); ++start) {
    const std::span<const TokenId> key = tokens.subspan(start, n);
    const size_t end =
        std::min(tokens.size(), start + n + static_cast<size_t>(config_.continuation_tokens));
    std::vector<TokenId> continuation(tokens.begin() + static_cast<std::ptrdiff_t>(start + n),
                                      tokens.begin() + static_cast<std::ptrdiff_t>(end));
    auto it = find(key);
    if (it != lru_.end()) {
      it->continuation = std::move(continuation);
      lru_.splice(lru_.begin(), lru_, it);
      continue;
    }
    if (size() >= config_.max_entries) {  // drop the least recent
      const Lru::iterator last = std::prev(lru_.end());
      const auto [begin, stop] = entries_.equal_range(hash(last->key));
      for (auto e = begin; e != stop; ++e) {
        if (e->second == last) {
          entries_.erase(e);
          break;
        }
      }
      lru_.erase(last);
    }
    lru_.push_front(Entry{std::vector<TokenId>(key.begin(), key.end()), std::move(continuation)});
    entries_.emplace(hash(key), lru_.begin());
  }
}

void NgramPool::draft(std::span<const TokenId> history, int32_t max_tokens,
                      std::vector<TokenId>& draft) {
  draft.clear();
  const auto n = static_cast<size_t>(config_.n);
  if (history.size() < n || max_tokens <= 0) return;
  const auto it = find(history.subspan(history.size() - n));
  if (it == lru_.end()) return;
  lru_.splice(lru_.begin(), lru_, it);
  const size_t count = std::min(it->continuation.size(), static_cast<size_t>(max_tokens));
  draft.assign(it->continuation.begin(),
               it->continuation.begin() + static_cast<std::ptrdiff_t>(count));
}

}  // namespace trellis
