#include "spec/prompt_lookup.h"

#include <algorithm>

namespace trellis {
namespace {

// The start of the latest occurrence of history's last n tokens that ends before the suffix
// itself does, or -1.
int64_t latest_earlier_occurrence(std::span<const TokenId> history, int64_t n) {
  const auto size = static_cast<int64_t>(history.size());
  const std::span<const TokenId> suffix = history.subspan(static_cast<size_t>(size - n));
  for (int64_t start = size - n - 1; start >= 0; --start) {
    if (std::equal(suffix.begin(), suffix.end(), history.begin() + start)) return start;
  }
  return -1;
}

}  // namespace

void prompt_lookup_draft(std::span<const TokenId> history, const PromptLookupConfig& config,
                         std::vector<TokenId>& draft) {
  draft.clear();
  const auto size = static_cast<int64_t>(history.size());
  for (int64_t n = std::min<int64_t>(config.max_ngram, size - 1); n >= config.min_ngram; --n) {
    const int64_t start = latest_earlier_occurrence(history, n);
    if (start < 0) continue;
    const int64_t from = start + n;  // what followed the occurrence
    const int64_t to = std::min<int64_t>(size, from + config.max_tokens);
    draft.assign(history.begin() + from, history.begin() + to);
    return;
  }
}

}  // namespace trellis
