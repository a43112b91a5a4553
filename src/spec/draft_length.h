// How many draft tokens a sequence has verified in its next step. Speculation pays when drafts
// are accepted and the step is bound by reading the weights (one sequence's extra rows cost
// little); it must step aside when drafts miss or the batch already keeps the cores busy.
//
//   acceptance  an exponentially weighted rate of accepted / drafted tokens, starting hopeful (1)
//   length      the expected run of accepted tokens, 1 / (1 - acceptance), capped at max_tokens;
//               0 below min_acceptance, except one token every probe_interval steps, so that a
//               sequence whose text turns repetitive is noticed again
//   batch       a step's decode tokens and drafts together take at most max_step_rows rows,
//               shared evenly by the sequences that decode in it: a single sequence drafts up to
//               max_tokens, a large batch (already compute-bound) none
//   cost        of the lengths these allow, the one with the most tokens expected per
//               millisecond of the step (spec/step_cost.h), as if every decoding sequence drafted
//               as many: the i-th draft token is kept with probability about acceptance^i (the
//               acceptance counted at most 0.9 here), and a step of n sequences with k drafts
//               each has n (1 + k) rows. A batch whose kernels
//               are compute-bound thus drafts only what is nearly certain, or nothing
#pragma once

#include <cstdint>

#include "spec/step_cost.h"

namespace trellis {

struct DraftLengthConfig {
  int32_t max_tokens = 8;
  double min_acceptance = 0.2;
  double decay = 0.7;  // weight of the history against the newest verification
  int32_t probe_interval = 16;
  int32_t max_step_rows = 32;
  // Choose the length by what steps cost (below); off: by acceptance and rows alone, which makes
  // the lengths independent of timing (tests that count drafts).
  bool weigh_step_cost = true;
};

class DraftLength {
 public:
  // `acceptance`: the rate to start from (1: hopeful, a full draft first).
  explicit DraftLength(DraftLengthConfig config = {}, double acceptance = 1.0)
      : config_(config), acceptance_(acceptance) {}

  // The draft length for the next step, in which `n_decoding` sequences (this one included)
  // decode, with steps costing what `cost` measured (nothing measured: rows count as free).
  int32_t next(int32_t n_decoding, const StepCost& cost = StepCost());
  // A verification: `drafted` tokens proposed, the first `accepted` of them taken.
  void record(int32_t drafted, int32_t accepted);

  double acceptance() const { return acceptance_; }

 private:
  // Of the lengths 0..longest, the one with the most tokens expected per millisecond of a step
  // where each of the n sequences drafts as many.
  int32_t cheapest_per_token(int32_t longest, int32_t n, const StepCost& cost) const;

  DraftLengthConfig config_;
  double acceptance_ = 1.0;
  int32_t steps_without_draft_ = 0;
};

}  // namespace trellis
