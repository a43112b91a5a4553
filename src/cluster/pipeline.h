// The engine's view of a model whose layers are split over several processes (pipeline stages):
// this process is the first stage; it holds the engine, the scheduler, the radix tree and the
// block pool's bookkeeping, and the other stages follow its steps. Block ids are global: every
// stage's KV storage holds the same blocks for its own layers, so what the tree decides (sharing,
// copy-on-write, eviction, preemption) is valid everywhere.
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "base/thread_pool.h"
#include "cluster/stage_stats.h"
#include "batch/forward_batch.h"
#include "gguf/gguf_file.h"
#include "kv/kv_storage.h"
#include "model/layer_range.h"
#include "model/model.h"

namespace trellis {

// What the other stages need to hold an engine's KV and buffers.
struct PipelineSetup {
  int32_t n_blocks = 0;
  int32_t block_size = 0;
  KvTypes kv_types;
  int32_t max_rows = 0;  // rows of the largest step
  int32_t n_ctx = 0;
};

class Pipeline {
 public:
  virtual ~Pipeline() = default;
  virtual int n_stages() const = 0;
  // The part of `file`'s model this process holds (the same file on every stage).
  virtual Result<LayerRange> local_layers(const GgufFile& file) = 0;
  // An engine starts: the other stages allocate their KV storage and buffers.
  virtual Status begin_engine(const PipelineSetup& setup) = 0;
  // Sends one step down the pipeline: runs this stage's layers on it (`model`, `kv`, `ws` and
  // `pool` are this stage's) and hands the hidden rows on; `copies` (the step's copy-on-write
  // copies, already made here) go along and are cleared. Up to n_stages() steps may be in flight,
  // so that each stage works on a different one; the others never see a step out of order.
  virtual Status launch(const Model& model, const ForwardBatch& batch, KvStorage& kv,
                        Workspace& ws, ThreadPool& pool, std::vector<BlockCopy>& copies) = 0;
  // Waits for the oldest step in flight and stores the logits of its output rows, in order, as
  // Model::forward does. An error when a stage fails or does not answer in time.
  virtual Status collect(const Model& model, float* logits) = 0;
  // The engine is gone: the other stages free what begin_engine allocated.
  virtual void end_engine() = 0;
  // Every stage's figures as of the last step, this one first. Any thread.
  virtual std::vector<StageStats> stage_stats() const = 0;
};

}  // namespace trellis
