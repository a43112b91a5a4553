#include "sample/sampler.h"

#include <algorithm>
#include <cassert>
#include <cfloat>
#include <cmath>
#include <limits>
#include <string>

#include "sample/penalties.h"

namespace trellis {
namespace {

// The canonical order of candidates: higher logit first, lower id first among equal logits.
// A strict total order (ids are unique), so sorting results do not depend on the algorithm.
template <typename C>
bool ranks_before(const C& a, const C& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Keeps sorting well defined: NaN becomes -inf, +inf the largest finite float.
float sanitize(float logit) {
  if (logit <= FLT_MAX) return logit;  // false for NaN and +inf
  return std::isnan(logit) ? -std::numeric_limits<float>::infinity() : FLT_MAX;
}

// First size of the sorted prefix that top-p grows on demand (then doubled each time): the
// nucleus is usually a few dozen tokens, so the whole vocab is rarely sorted.
constexpr size_t kTopPFirstChunk = 64;

}  // namespace

Result<Sampler> Sampler::create(const SamplingParams& params, int32_t vocab_size) {
  TRELLIS_TRY(params.validate());
  if (vocab_size <= 0) {
    return Error{"sampler needs a vocab size > 0, got " + std::to_string(vocab_size)};
  }
  return Sampler(params, vocab_size);
}

Sampler::Sampler(const SamplingParams& params, int32_t vocab_size)
    : params_(params),
      vocab_size_(vocab_size),
      rng_(params.seed),
      logits_(static_cast<size_t>(vocab_size)),
      candidates_(params.is_greedy() ? 0 : static_cast<size_t>(vocab_size)),
      counts_(params.has_penalties() ? static_cast<size_t>(vocab_size) : 0, 0) {}

TokenId Sampler::sample(std::span<const float> logits, std::span<const TokenId> history) {
  assert(logits.size() == static_cast<size_t>(vocab_size_));
  load_logits(logits);
  if (params_.has_penalties()) apply_penalties(params_, history, logits_, counts_);
  if (params_.is_greedy()) return argmax();
  const size_t n_kept = filter_candidates();
  return draw(n_kept);
}

void Sampler::load_logits(std::span<const float> logits) {
  const size_t n = std::min(logits.size(), logits_.size());
  for (size_t i = 0; i < n; ++i) logits_[i] = sanitize(logits[i]);
}

TokenId Sampler::argmax() const {
  size_t best = 0;
  for (size_t i = 1; i < logits_.size(); ++i) {
    if (logits_[i] > logits_[best]) best = i;  // strict: the lowest id wins ties
  }
  return static_cast<TokenId>(best);
}

size_t Sampler::filter_candidates() {
  auto begin = candidates_.begin();
  size_t n = candidates_.size();
  for (size_t i = 0; i < n; ++i)
    candidates_[i] = Candidate{static_cast<TokenId>(i), logits_[i], 0.0f};
  bool sorted = false;

  // 3. top-k: the k best in canonical order, sorted.
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    n = static_cast<size_t>(params_.top_k);
    std::partial_sort(begin, begin + static_cast<ptrdiff_t>(n), candidates_.end(),
                      ranks_before<Candidate>);
    sorted = true;
  }

  // 4 + 5. temperature and softmax weights. The max gets weight exactly 1 (also when every logit
  // is -inf, which makes the draw uniform instead of NaN).
  float max_logit = candidates_[0].logit;
  if (!sorted) {
    for (size_t i = 1; i < n; ++i) max_logit = std::max(max_logit, candidates_[i].logit);
  }
  const float temperature = params_.temperature;
  double total_weight = 0.0;
  for (size_t i = 0; i < n; ++i) {
    Candidate& c = candidates_[i];
    c.weight = c.logit == max_logit ? 1.0f : std::exp((c.logit - max_logit) / temperature);
    total_weight += c.weight;
  }

  // 6. top-p
  if (params_.top_p < 1.0f) n = keep_top_p(n, total_weight, sorted ? n : 0);

  // 7. min-p: weights are relative to the max already. remove_if keeps the order (canonical).
  if (params_.min_p > 0.0f) {
    const float threshold = params_.min_p;
    auto end = std::remove_if(begin, begin + static_cast<ptrdiff_t>(n),
                              [threshold](const Candidate& c) { return c.weight < threshold; });
    n = static_cast<size_t>(end - begin);
  }
  return n;
}

// Sorts [0, n) in canonical order lazily, a growing chunk at a time, until the sorted prefix holds
// top_p of the total weight; returns the length of that prefix. [0, sorted_end) is sorted already.
//
//   [0 ............ sorted_end) [sorted_end ............ n)
//    sorted, all rank before     unsorted rest
//    everything on the right
size_t Sampler::keep_top_p(size_t n, double total_weight, size_t sorted_end) {
  const double target = static_cast<double>(params_.top_p) * total_weight;
  auto at = [this](size_t i) { return candidates_.begin() + static_cast<ptrdiff_t>(i); };
  size_t chunk = kTopPFirstChunk;
  double cumulative = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (i == sorted_end) {
      const size_t chunk_end = std::min(n, sorted_end + chunk);
      if (chunk_end < n)
        std::nth_element(at(sorted_end), at(chunk_end), at(n), ranks_before<Candidate>);
      std::sort(at(sorted_end), at(chunk_end), ranks_before<Candidate>);
      sorted_end = chunk_end;
      chunk *= 2;
    }
    cumulative += candidates_[i].weight;
    if (cumulative >= target) return i + 1;
  }
  return n;
}

// Inverse CDF over [0, n) in their current (canonical) order.
TokenId Sampler::draw(size_t n) {
  assert(n > 0);
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += candidates_[i].weight;
  const double target = rng_.next_double() * total;
  double cumulative = 0.0;
  size_t last_positive = 0;
  for (size_t i = 0; i < n; ++i) {
    const float weight = candidates_[i].weight;
    if (weight <= 0.0f) continue;
    cumulative += weight;
    last_positive = i;
    if (target < cumulative) return candidates_[i].id;
  }
  // Only reachable when rounding put target at the very end of the range.
  return candidates_[last_positive].id;
}

}  // namespace trellis
