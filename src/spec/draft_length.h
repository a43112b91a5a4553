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
#pragma once

#include <cstdint>

namespace trellis {

struct DraftLengthConfig {
  int32_t max_tokens = 8;
  double min_acceptance = 0.2;
  double decay = 0.7;  // weight of the history against the newest verification
  int32_t probe_interval = 16;
  int32_t max_step_rows = 32;
};

class DraftLength {
 public:
  // `acceptance`: the rate to start from (1: hopeful, a full draft first).
  explicit DraftLength(DraftLengthConfig config = {}, double acceptance = 1.0)
      : config_(config), acceptance_(acceptance) {}

  // The draft length for the next step, in which `n_decoding` sequences (this one included)
  // decode.
  int32_t next(int32_t n_decoding);
  // A verification: `drafted` tokens proposed, the first `accepted` of them taken.
  void record(int32_t drafted, int32_t accepted);

  double acceptance() const { return acceptance_; }

 private:
  DraftLengthConfig config_;
  double acceptance_ = 1.0;
  int32_t steps_without_draft_ = 0;
};

}  // namespace trellis
