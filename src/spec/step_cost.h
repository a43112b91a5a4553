// What a step's rows cost on this machine with this model, as speculative decoding needs to know
// it: a draft is worth its rows only if the tokens it is likely to add come cheaper than the
// steps they save. The cost is far from linear in the rows: one sequence alone is bound by reading
// the weights (extra rows nearly free), kernels work in tiles (a ninth row may cost a whole tile),
// and a batch whose kernels are already compute-bound pays for every row in full.
//
// So the time of a decode step is kept per row count, an exponentially weighted mean of the
// latest steps of that size. A size never measured is estimated from its measured neighbours:
// between two, on the line joining them; above all of them, as the largest one below (optimistic,
// so that a larger step gets tried and measured once). A size not seen for kMemorySteps steps
// counts as never measured: one slow step (the machine busy elsewhere) must not keep a size
// untried for good.
#pragma once

#include <array>
#include <cstdint>

namespace trellis {

class StepCost {
 public:
  static constexpr int32_t kMaxRows = 128;  // larger steps count as this size
  static constexpr int64_t kMemorySteps = 256;

  // A decode step of `rows` rows took `ms` milliseconds.
  void record(int32_t rows, double ms);
  // The estimated time of a step of `rows` rows; 0 when no step was measured lately.
  double estimate_ms(int32_t rows) const;
  bool known() const { return steps_ > 0; }

 private:
  // The mean time of steps of `rows` rows, or 0 if none was seen within kMemorySteps steps.
  double measured(int32_t rows) const;

  std::array<double, kMaxRows + 1> ms_{};     // by row count; 0: never measured
  std::array<int64_t, kMaxRows + 1> seen_{};  // the step count when it was last measured
  int64_t steps_ = 0;
};

}  // namespace trellis
