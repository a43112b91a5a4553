// The tokens of recent chat replies, by their text: when a client sends a conversation back with
// the model's reply in it (every agent turn does), the reply is rendered with the tokens the
// model produced, not a re-tokenization of its text that may split it differently, so the prefix
// cache matches through the whole earlier conversation (ChatRenderOptions::reply_tokens).
// Bounded by a token budget, least recently used dropped first. Thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/token_id.h"

namespace trellis {

class ReplyMemory {
 public:
  explicit ReplyMemory(int64_t max_tokens = int64_t{1} << 20) : max_tokens_(max_tokens) {}

  // Remembers that the model replied `text` with `tokens` in cache namespace `ns`.
  void remember(const std::string& ns, std::string_view text, std::vector<TokenId> tokens);
  // The tokens of a remembered reply, or null. The pointer stays valid while the returned
  // holder lives.
  std::shared_ptr<const std::vector<TokenId>> find(const std::string& ns, std::string_view text);

  int64_t n_tokens() const;

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const std::vector<TokenId>> tokens;
  };
  static std::string key_of(const std::string& ns, std::string_view text);

  int64_t max_tokens_;
  mutable std::mutex mutex_;
  std::list<Entry> entries_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  int64_t n_tokens_ = 0;
};

}  // namespace trellis
