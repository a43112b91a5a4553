// `--pipeline`: the model's layers split over the ranks of an MPI job (mpirun -np N trellis ...).
// Rank 0 runs the command with the first stage; every other rank holds its stage until rank 0
// ends, then exits, never running the command itself.
#pragma once

#include <string>

#include "base/result.h"
#include "cluster/pipeline.h"
#include "cluster/stage_worker.h"

namespace trellis::cli {

// Starts MPI (once). On rank 0, returns the pipeline (alive until the process exits, when the
// other stages are told to stop). On any other rank, runs that rank's stage and exits.
Result<Pipeline*> start_pipeline(const std::string& model_path, int n_threads,
                                 const PipelineOptions& options);

// Marks the job failed: at exit every rank is killed rather than told to stop.
void pipeline_failed();

}  // namespace trellis::cli
