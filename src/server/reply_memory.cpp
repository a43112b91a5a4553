#include "server/reply_memory.h"

namespace trellis {

std::string ReplyMemory::key_of(const std::string& ns, std::string_view text) {
  std::string key = ns;
  key += '\0';
  key += text;
  return key;
}

void ReplyMemory::remember(const std::string& ns, std::string_view text,
                           std::vector<TokenId> tokens) {
  if (text.empty() || static_cast<int64_t>(tokens.size()) > max_tokens_) return;
  std::string key = key_of(ns, text);
  auto shared = std::make_shared<const std::vector<TokenId>>(std::move(tokens));
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = index_.find(key); it != index_.end()) {
    n_tokens_ -= static_cast<int64_t>(it->second->tokens->size());
    entries_.erase(it->second);
    index_.erase(it);
  }
  n_tokens_ += static_cast<int64_t>(shared->size());
  entries_.push_front({key, std::move(shared)});
  index_.emplace(std::move(key), entries_.begin());
  while (n_tokens_ > max_tokens_) {
    n_tokens_ -= static_cast<int64_t>(entries_.back().tokens->size());
    index_.erase(entries_.back().key);
    entries_.pop_back();
  }
}

std::shared_ptr<const std::vector<TokenId>> ReplyMemory::find(const std::string& ns,
                                                              std::string_view text) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = index_.find(key_of(ns, text));
  if (it == index_.end()) return nullptr;
  entries_.splice(entries_.begin(), entries_, it->second);
  return it->second->tokens;
}

int64_t ReplyMemory::n_tokens() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return n_tokens_;
}

}  // namespace trellis
