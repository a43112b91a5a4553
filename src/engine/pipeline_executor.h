// Runs each step down a pipeline of processes that each hold some of the model's layers (this
// process the first stage): up to one step per stage in flight.
#pragma once

#include <vector>

#include "base/thread_pool.h"
#include "cluster/pipeline.h"
#include "engine/step_executor.h"
#include "kv/kv_storage.h"
#include "model/model.h"

namespace trellis {

class PipelineExecutor final : public StepExecutor {
 public:
  // Tells the other stages to hold an engine's KV and buffers (see Pipeline::begin_engine).
  // `pipeline`, `model` (this stage's layers) and `kv` must outlive the executor.
  static Result<std::unique_ptr<PipelineExecutor>> create(Pipeline& pipeline, const Model& model,
                                                          KvStorage& kv, int32_t max_rows,
                                                          int32_t n_ctx, int n_threads);
  // The other stages free what they held for the engine.
  ~PipelineExecutor() override;
  PipelineExecutor(const PipelineExecutor&) = delete;
  PipelineExecutor& operator=(const PipelineExecutor&) = delete;

  int32_t depth() const override { return pipeline_.n_stages(); }
  int n_threads() const override { return threads_.size(); }
  // Runs this stage's layers and sends the step on, with its copy-on-write block copies.
  Status launch(const ForwardBatch& batch) override;
  Status collect(float* logits) override;
  std::vector<StageStats> stage_stats() const override { return pipeline_.stage_stats(); }

 private:
  PipelineExecutor(Pipeline& pipeline, const Model& model, KvStorage& kv, int32_t max_rows,
                   int32_t n_ctx, int n_threads);

  Pipeline& pipeline_;
  const Model& model_;
  KvStorage& kv_;
  Workspace workspace_;
  ThreadPool threads_;
  // The copy-on-write copies made here since the last launch: the other stages make them too.
  std::vector<BlockCopy> block_copies_;
};

}  // namespace trellis
