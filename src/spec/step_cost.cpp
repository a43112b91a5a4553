#include "spec/step_cost.h"

#include <algorithm>

namespace trellis {
namespace {

// Weight of a size's history against its newest step.
constexpr double kDecay = 0.8;

}  // namespace

void StepCost::record(int32_t rows, double ms) {
  if (rows <= 0 || !(ms > 0)) return;
  ++steps_;
  const auto r = static_cast<size_t>(std::min(rows, kMaxRows));
  const bool fresh = measured(static_cast<int32_t>(r)) > 0;
  ms_[r] = fresh ? kDecay * ms_[r] + (1 - kDecay) * ms : ms;
  seen_[r] = steps_;
}

double StepCost::measured(int32_t rows) const {
  const auto r = static_cast<size_t>(rows);
  return ms_[r] > 0 && steps_ - seen_[r] < kMemorySteps ? ms_[r] : 0.0;
}

double StepCost::estimate_ms(int32_t rows) const {
  const int32_t r = std::clamp(rows, 1, kMaxRows);
  if (const double ms = measured(r); ms > 0) return ms;
  int32_t below = r - 1;
  while (below >= 1 && measured(below) == 0) --below;
  int32_t above = r + 1;
  while (above <= kMaxRows && measured(above) == 0) ++above;
  const bool has_below = below >= 1;
  const bool has_above = above <= kMaxRows;
  if (has_below && has_above) {
    const double lo = measured(below);
    const double hi = measured(above);
    return lo + (hi - lo) * (r - below) / (above - below);
  }
  if (has_below) return measured(below);
  // Only larger steps measured: a smaller one costs at most as much.
  return has_above ? measured(above) : 0.0;
}

}  // namespace trellis
