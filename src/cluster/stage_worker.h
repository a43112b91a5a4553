// A pipeline stage other than the first (MPI ranks 1 .. n - 1): it holds a range of the model's
// layers and their share of every KV block, and follows rank 0's commands until it says to stop.
// Only built with MPI (TRELLIS_HAVE_MPI).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/mpi_transport.h"

namespace trellis {

struct PipelineOptions {
  std::vector<int64_t> layers_per_rank;  // empty: balanced by weight bytes
  int32_t micro_batches = 0;             // per step; 0: one per stage for steps of 32 rows per
                                         // stage or more, fewer for smaller steps
  double timeout_s = 60;                 // the bound on every wait for another stage
};

// Runs this rank's stage of `model_path` with n_threads threads; returns the process's exit code.
// An error (a model that does not load, a stage that stops answering) ends the whole job.
int run_stage_worker(MpiTransport& transport, const std::string& model_path, int n_threads,
                     const PipelineOptions& options);

}  // namespace trellis
