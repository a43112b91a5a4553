// Speculative decoding's fourth source of drafts: a smaller model of the same vocabulary (a 0.5B
// model for a 7B one) that guesses the target's next tokens by greedy decoding.
//
// Its KV lives in a storage of its own layout addressed by the target's block ids: a sequence's
// block table serves both models, so the draft's KV is allocated, shared through the prefix cache
// and freed with the target's. What the draft has computed is tracked per block, for the
// generation the pool handed the block out in (BlockPool::generation): rows [0, n) of a block
// hold the draft's KV of the block's tokens. A sequence's draft therefore starts where its blocks'
// draft rows end: a prompt whose prefix an earlier request drafted over is not computed again,
// and a block that is freed and handed out again starts empty.
//
// Drafting a sequence of S tokens (the last one pending, not yet computed by the target) for k
// tokens takes one catch-up pass (positions from the first without draft KV to S - 1, chunked to
// the workspace, its last row giving the first guess) and k - 1 passes of one row each; all the
// sequences drafting in a step share each pass. The guesses' own KV (positions S .. S + k - 2) is
// written too, but counted as the draft's only once the target has verified them (confirm()).
//
// The draft only guesses: wrong or stale draft KV lowers the acceptance rate, never changes what
// the target outputs. Not thread-safe: one owner (the engine loop).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/result.h"
#include "base/thread_pool.h"
#include "base/token_id.h"
#include "batch/forward_batch.h"
#include "kv/block_pool.h"
#include "kv/kv_storage.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace trellis {

// Why `draft` cannot draft for `target` (different vocabularies), or nothing.
Status check_same_vocab(const Tokenizer& draft, const Tokenizer& target);

struct DraftModelShape {
  int32_t block_size = 32;
  KvTypes kv_types;
  int32_t n_ctx = 0;     // the longest sequence
  int32_t max_rows = 0;  // rows per pass (the catch-up is chunked to it)
  int32_t max_seqs = 0;  // sequences drafting in one step
};

// One sequence's draft: `tokens` (the last one pending), its block table (covering positions up
// to tokens.size() + n_draft - 2), and where the n_draft guesses go.
struct DraftJob {
  std::span<const TokenId> tokens;
  std::span<const int32_t> block_table;
  int32_t n_draft = 0;
  TokenId* out = nullptr;
};

class DraftModel {
 public:
  // `model` drafts over the blocks of `blocks` on `threads` (both must outlive it); its KV
  // storage holds as many blocks of its own layout.
  static Result<std::unique_ptr<DraftModel>> create(std::unique_ptr<Model> model,
                                                    const BlockPool& blocks, ThreadPool& threads,
                                                    const DraftModelShape& shape);

  // Writes each job's n_draft greedy guesses. Preconditions: jobs.size() <= max_seqs, each
  // n_draft >= 1, tokens in the vocab.
  void draft(std::span<const DraftJob> jobs);
  // The target kept positions [from, to) of a drafted sequence: the draft's KV there holds the
  // sequence's tokens now. Precondition: the block table covers them.
  void confirm(std::span<const int32_t> block_table, int32_t from, int32_t to);

  // The first position of `n_positions` whose draft KV is missing (a prefix of them is there).
  int32_t computed_prefix(std::span<const int32_t> block_table, int32_t n_positions) const;
  size_t kv_bytes() const { return kv_.bytes(); }
  // Rows the draft model has computed (catch-up and guesses), in total.
  int64_t n_rows_computed() const { return n_rows_computed_; }
  const Model& model() const { return *model_; }

 private:
  // One job's progress through the catch-up pass.
  struct Progress {
    int32_t next = 0;  // the first position not computed yet
    int32_t rows = 0;  // rows in the pass being run (0: none left, or it waits for another job)
  };

  DraftModel(std::unique_ptr<Model> model, KvStorage kv, const BlockPool& blocks,
             ThreadPool& threads, const DraftModelShape& shape);
  // Computes the jobs' positions up to their pending token, in as many passes as the workspace
  // and shared blocks require; each job's first guess comes from its last row.
  void catch_up(std::span<const DraftJob> jobs);
  // Adds what the job may compute in this pass to the batch and returns its row count; 0 when
  // the pass is full or another job writes a block it shares this pass.
  int32_t add_catch_up(const DraftJob& job, const Progress& progress);
  // Runs batch_ and returns the argmax of each output row, into guesses_.
  void run_pass();

  std::unique_ptr<Model> model_;
  KvStorage kv_;
  const BlockPool& blocks_;
  int32_t block_size_;
  int32_t max_rows_;
  Workspace workspace_;
  ThreadPool& threads_;
  // Per block: the pool generation its draft rows belong to, and how many leading rows there are.
  std::vector<uint32_t> generation_;
  std::vector<int32_t> rows_;
  // A pass's buffers, reused.
  ForwardBatch batch_;
  std::vector<float> logits_;
  std::vector<TokenId> guesses_;
  std::vector<Progress> progress_;
  std::vector<int32_t> written_blocks_;  // blocks shared with other sequences written this pass
  std::vector<size_t> output_jobs_;      // the job of each output row
  int64_t n_rows_computed_ = 0;
};

}  // namespace trellis
