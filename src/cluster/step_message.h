// What every stage of a pipeline needs to know of one engine step, as one flat message: the
// copy-on-write block copies the step's planning made (each stage repeats them in its own KV
// storage) and the step's rows cut into micro-batches that travel through the stages one after
// another, so that stage k works on micro-batch m + 1 while stage k + 1 works on micro-batch m.
//
//   [kind][n_copies]{src dst n_slots}...[n_micro] per micro-batch:
//     [n_rows][n_seqs][n_out] tokens[n_rows] positions[n_rows]
//     per sequence: [row_begin][row_end][n_blocks] blocks[n_blocks]   output_rows[n_out]
//
// A micro-batch is a run of consecutive rows of the step; it may cut a prefill chunk in two, which
// is exact: the later part's rows attend to the earlier part's keys, written by the same stage
// just before. Kernels are batch-invariant, so every row's result is the same as in the whole step.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/result.h"
#include "batch/forward_batch.h"
#include "kv/kv_storage.h"

namespace trellis {

enum class StageCommand : int32_t {
  SETUP = 1,     // an engine starts: allocate KV and buffers (see PipelineSetup)
  STEP = 2,      // run a step
  END = 3,       // the engine is gone: free them
  SHUTDOWN = 4,  // the process ends
};

// A micro-batch decoded from a message: a ForwardBatch whose block tables point into `blocks`.
struct MicroBatch {
  ForwardBatch batch;
  std::vector<int32_t> blocks;
};

// Appends the STEP message for `batch` (cut into at most n_micro micro-batches) and `copies`.
void encode_step(const ForwardBatch& batch, std::span<const BlockCopy> copies, int32_t n_micro,
                 std::vector<int32_t>& words);

struct DecodedStep {
  std::vector<BlockCopy> copies;
  std::vector<MicroBatch> micro;
};

// Decodes a STEP message (words after the kind); checks every count and index against the
// message's length, the pool's n_blocks and the workspace's max_rows.
Status decode_step(std::span<const int32_t> words, int32_t n_blocks, int32_t max_rows,
                   DecodedStep& step);

}  // namespace trellis
