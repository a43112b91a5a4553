#include "sample/logprobs.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace trellis {
namespace {

constexpr double kMinusInf = -std::numeric_limits<double>::infinity();

double clean(float logit) {
  return std::isnan(logit) ? kMinusInf : static_cast<double>(logit);
}

// Heap order for the running top-n: the root is the entry that ranks last (lowest logit, and
// among equal logits the highest id), so it is the one a better candidate evicts.
bool logprob_ranks_before(const TokenLogprob& a, const TokenLogprob& b) {
  return a.logprob > b.logprob || (a.logprob == b.logprob && a.id < b.id);
}

}  // namespace

double log_sum_exp(std::span<const float> logits) {
  double max_logit = kMinusInf;
  for (float logit : logits) max_logit = std::max(max_logit, clean(logit));
  if (max_logit == kMinusInf) return kMinusInf;
  if (std::isinf(max_logit)) return max_logit;  // +inf dominates everything
  double sum = 0.0;
  for (float logit : logits) sum += std::exp(clean(logit) - max_logit);
  return max_logit + std::log(sum);
}

Logprobs compute_logprobs(std::span<const float> logits, TokenId chosen, int32_t n_top) {
  assert(!logits.empty());
  assert(chosen >= 0 && static_cast<size_t>(chosen) < logits.size());
  assert(n_top >= 0);
  const double log_total = log_sum_exp(logits);
  auto logprob_of = [&](size_t i) { return static_cast<float>(clean(logits[i]) - log_total); };

  Logprobs result;
  result.chosen = TokenLogprob{chosen, logprob_of(static_cast<size_t>(chosen))};

  // Select on the raw logits (same order as the logprobs, and exact), convert at the end.
  const size_t n_keep = std::min(static_cast<size_t>(std::max(n_top, 0)), logits.size());
  std::vector<TokenLogprob>& top = result.top;
  top.reserve(n_keep);
  if (n_keep == 0) return result;
  for (size_t i = 0; i < logits.size(); ++i) {
    TokenLogprob entry{static_cast<TokenId>(i), static_cast<float>(clean(logits[i]))};
    if (top.size() < n_keep) {
      top.push_back(entry);
      std::push_heap(top.begin(), top.end(), logprob_ranks_before);
    } else if (logprob_ranks_before(entry, top.front())) {
      std::pop_heap(top.begin(), top.end(), logprob_ranks_before);
      top.back() = entry;
      std::push_heap(top.begin(), top.end(), logprob_ranks_before);
    }
  }
  std::sort_heap(top.begin(), top.end(), logprob_ranks_before);
  for (TokenLogprob& entry : top) entry.logprob = logprob_of(static_cast<size_t>(entry.id));
  return result;
}

}  // namespace trellis
