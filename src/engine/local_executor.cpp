#include "engine/local_executor.h"

#include <cassert>

namespace trellis {

LocalExecutor::LocalExecutor(const Model& model, KvStorage& kv, int32_t max_rows, int32_t n_ctx,
                             int n_threads)
    : model_(model),
      kv_(kv),
      workspace_(model.hparams(), max_rows),
      threads_(n_threads > 0 ? n_threads : ThreadPool::default_thread_count()) {
  // Sized for the largest step here, so that no step allocates.
  workspace_.attention_scratch.reserve(threads_.size(), kv_.layout(), model.hparams().n_head, n_ctx,
                                       workspace_.max_rows());
}

// The forward pass runs in collect(), into the caller's logits: launch() has nowhere to put them,
// and with depth 1 the two calls always come in pairs.
Status LocalExecutor::launch(const ForwardBatch& batch) {
  assert(launched_ == nullptr && "one step at a time");
  launched_ = &batch;
  return {};
}

Status LocalExecutor::collect(float* logits) {
  assert(launched_ != nullptr && "collect without a launched step");
  model_.forward(*launched_, kv_, workspace_, threads_, logits);
  launched_ = nullptr;
  return {};
}

}  // namespace trellis
