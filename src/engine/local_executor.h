// Runs each step's forward pass in this process, at once, on a pool of threads.
#pragma once

#include <memory>

#include "base/thread_pool.h"
#include "engine/step_executor.h"
#include "kv/kv_storage.h"
#include "model/model.h"

namespace trellis {

class LocalExecutor final : public StepExecutor {
 public:
  // `model` and `kv` must outlive the executor. Buffers are sized for steps of up to `max_rows`
  // rows over sequences of up to `n_ctx` tokens; n_threads 0: all cores.
  LocalExecutor(const Model& model, KvStorage& kv, int32_t max_rows, int32_t n_ctx, int n_threads);

  int32_t depth() const override { return 1; }
  int n_threads() const override { return threads_.size(); }
  // Computes the step; collect() hands over its logits.
  Status launch(const ForwardBatch& batch) override;
  Status collect(float* logits) override;
  std::vector<StageStats> stage_stats() const override { return {}; }
  // Its threads, for other work of the same loop between steps (a draft model's passes): one
  // pool, so that no idle pool's spinning workers take the cores from the other.
  ThreadPool& threads() { return threads_; }

 private:
  const Model& model_;
  KvStorage& kv_;
  Workspace workspace_;
  ThreadPool threads_;
  const ForwardBatch* launched_ = nullptr;  // the step launched and not collected
};

}  // namespace trellis
