#include "engine/pipeline_executor.h"

namespace trellis {

PipelineExecutor::PipelineExecutor(Pipeline& pipeline, const Model& model, KvStorage& kv,
                                   int32_t max_rows, int32_t n_ctx, int n_threads)
    : pipeline_(pipeline),
      model_(model),
      kv_(kv),
      workspace_(model.hparams(), max_rows),
      threads_(n_threads > 0 ? n_threads : ThreadPool::default_thread_count()) {
  workspace_.attention_scratch.reserve(threads_.size(), kv_.layout(), model.hparams().n_head, n_ctx,
                                       workspace_.max_rows());
}

Result<std::unique_ptr<PipelineExecutor>> PipelineExecutor::create(Pipeline& pipeline,
                                                                   const Model& model,
                                                                   KvStorage& kv, int32_t max_rows,
                                                                   int32_t n_ctx, int n_threads) {
  std::unique_ptr<PipelineExecutor> executor(
      new PipelineExecutor(pipeline, model, kv, max_rows, n_ctx, n_threads));
  // A step copies at most two blocks per sequence (see PrefixCache); max_rows bounds those.
  executor->block_copies_.reserve(static_cast<size_t>(max_rows) * 2);
  kv.log_copies_to(&executor->block_copies_);
  TRELLIS_TRY(pipeline.begin_engine(
      PipelineSetup{kv.n_blocks(), kv.layout().block_size, kv.layout().types, max_rows, n_ctx}));
  return executor;
}

PipelineExecutor::~PipelineExecutor() {
  kv_.log_copies_to(nullptr);
  pipeline_.end_engine();
}

Status PipelineExecutor::launch(const ForwardBatch& batch) {
  return pipeline_.launch(model_, batch, kv_, workspace_, threads_, block_copies_);
}

Status PipelineExecutor::collect(float* logits) {
  return pipeline_.collect(model_, logits);
}

}  // namespace trellis
