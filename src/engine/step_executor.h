// Where a planned step's forward pass runs. The engine loop plans a step, launches it here and
// later collects its logits, the same way whatever runs it:
//
//   LocalExecutor     this process: computes the step at once on its thread pool (depth 1)
//   PipelineExecutor  the model's layers split over MPI ranks: up to one step per stage in flight
//   (tests)           a scripted executor that stands in for a model (tests/unit/engine/)
//
// Chosen once, when the engine is created; the loop has one path for all of them.
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "batch/forward_batch.h"
#include "cluster/stage_stats.h"

namespace trellis {

class StepExecutor {
 public:
  virtual ~StepExecutor() = default;
  // Steps that may be in flight at once (>= 1). The loop keeps at most this many launched and not
  // collected; with 1, every step is collected before the next is planned.
  virtual int32_t depth() const = 0;
  // Threads the forward pass runs on (reported, not used by the loop).
  virtual int n_threads() const = 0;
  // Starts the step that `batch` describes. The batch's views (tokens, block tables) stay valid
  // until the step is collected. An error stops the engine for good.
  virtual Status launch(const ForwardBatch& batch) = 0;
  // Waits for the oldest launched step and writes the logits of its output rows, in order
  // ([n_output_rows][n_vocab]), to `logits`. An error stops the engine for good.
  virtual Status collect(float* logits) = 0;
  // Each stage's figures as of the last step, this process first; empty in one process. Any
  // thread.
  virtual std::vector<StageStats> stage_stats() const = 0;
};

}  // namespace trellis
