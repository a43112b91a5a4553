// The first stage's side of a pipeline over MPI (rank 0): it sends each step to the other stages,
// runs its own layers micro-batch by micro-batch, and collects the logits from the last stage.
// Only built with MPI (TRELLIS_HAVE_MPI).
#pragma once

#include <memory>

#include "cluster/mpi_transport.h"
#include "cluster/pipeline.h"
#include "cluster/stage_worker.h"

namespace trellis {

// A pipeline over every rank of the job; `transport` must be rank 0's.
std::unique_ptr<Pipeline> make_mpi_pipeline(MpiTransport& transport,
                                            const PipelineOptions& options);

// Tells every other stage to stop and closes MPI (rank 0, once no engine runs).
void shut_down_stages(MpiTransport& transport);

}  // namespace trellis
