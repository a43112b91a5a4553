#include "pipeline_runtime.h"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "base/thread_pool.h"
#ifdef TRELLIS_HAVE_MPI
#include "cluster/mpi_pipeline.h"
#include "cluster/mpi_transport.h"
#endif

namespace trellis::cli {
namespace {

std::atomic<bool> g_failed{false};

#ifdef TRELLIS_HAVE_MPI
// Rank 0's pipeline, kept until exit (engines and commands come and go before that).
std::unique_ptr<Pipeline> g_pipeline;

void end_job_at_exit() {
  MpiTransport* transport = MpiTransport::instance();
  if (transport == nullptr) return;
  if (g_failed) transport->abort(1);
  shut_down_stages(*transport);
}
#endif

}  // namespace

void pipeline_failed() {
  g_failed = true;
}

Result<Pipeline*> start_pipeline(const std::string& model_path, int n_threads,
                                 const PipelineOptions& options) {
#ifdef TRELLIS_HAVE_MPI
  if (g_pipeline) return g_pipeline.get();
  Result<MpiTransport*> transport = MpiTransport::init(nullptr, nullptr);
  if (!transport.ok()) return transport.error();
  MpiTransport& t = **transport;
  if (t.rank() != 0) {
    // mpirun passes SIGINT/SIGTERM to every rank; a stage outlives them until rank 0 (which
    // shuts down gracefully on them) tells it to stop. A dead rank 0 still ends the job: mpirun
    // then kills the others.
    std::signal(SIGINT, SIG_IGN);
    std::signal(SIGTERM, SIG_IGN);
    const int threads = n_threads > 0 ? n_threads : ThreadPool::default_thread_count();
    std::exit(run_stage_worker(t, model_path, threads, options));
  }
  g_pipeline = make_mpi_pipeline(t, options);
  std::atexit(end_job_at_exit);
  std::fprintf(stderr, "pipeline: %d stages (MPI ranks)\n", t.size());
  return g_pipeline.get();
#else
  (void)model_path;
  (void)n_threads;
  (void)options;
  return Error{
      "--pipeline needs a trellis built with MPI (install openmpi-bin and libopenmpi-dev, "
      "then rebuild: make cli)"};
#endif
}

}  // namespace trellis::cli
