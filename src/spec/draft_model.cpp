#include "spec/draft_model.h"

#include <algorithm>
#include <cassert>
#include <string>

namespace trellis {
namespace {

// The lowest id among the row's largest logits (greedy decoding's choice).
TokenId argmax(const float* row, int64_t n) {
  return static_cast<TokenId>(std::max_element(row, row + n) - row);
}

}  // namespace

Status check_same_vocab(const Tokenizer& draft, const Tokenizer& target) {
  const Vocab& d = draft.vocab();
  const Vocab& t = target.vocab();
  if (d.tokens.size() != t.tokens.size()) {
    return Error{"the draft model's vocabulary has " + std::to_string(d.tokens.size()) +
                 " tokens, the model's " + std::to_string(t.tokens.size()) +
                 ": a draft model must share the model's vocabulary"};
  }
  if (d.kind != t.kind) return Error{"the draft model's tokenizer is of another kind"};
  for (size_t id = 0; id < d.tokens.size(); ++id) {
    if (d.tokens[id] != t.tokens[id]) {
      return Error{"the draft model's token " + std::to_string(id) + " is '" + d.tokens[id] +
                   "', the model's '" + t.tokens[id] +
                   "': a draft model must share the model's vocabulary"};
    }
  }
  return {};
}

Result<std::unique_ptr<DraftModel>> DraftModel::create(std::unique_ptr<Model> model,
                                                       const BlockPool& blocks, ThreadPool& threads,
                                                       const DraftModelShape& shape) {
  assert(model != nullptr && shape.max_rows > 0 && shape.max_seqs > 0);
  Result<KvStorage> kv =
      KvStorage::create(model->kv_layout(shape.block_size, shape.kv_types), blocks.n_total());
  if (!kv.ok()) return Error{"the draft model's KV: " + kv.error().message};
  model->set_context_length(shape.n_ctx);
  return std::unique_ptr<DraftModel>(
      new DraftModel(std::move(model), std::move(kv).value(), blocks, threads, shape));
}

DraftModel::DraftModel(std::unique_ptr<Model> model, KvStorage kv, const BlockPool& blocks,
                       ThreadPool& threads, const DraftModelShape& shape)
    : model_(std::move(model)),
      kv_(std::move(kv)),
      blocks_(blocks),
      block_size_(shape.block_size),
      max_rows_(shape.max_rows),
      workspace_(model_->hparams(), shape.max_rows),
      threads_(threads),
      generation_(static_cast<size_t>(blocks.n_total()), 0),
      rows_(static_cast<size_t>(blocks.n_total()), 0) {
  // Sized for the largest pass here, so that drafting never allocates.
  workspace_.attention_scratch.reserve(threads_.size(), kv_.layout(), model_->hparams().n_head,
                                       shape.n_ctx, workspace_.max_rows());
  const auto max_seqs = static_cast<size_t>(shape.max_seqs);
  batch_.reserve(shape.max_rows, shape.max_seqs);
  logits_.resize(max_seqs * static_cast<size_t>(model_->hparams().n_vocab));
  guesses_.reserve(max_seqs);
  progress_.reserve(max_seqs);
  output_jobs_.reserve(max_seqs);
  written_blocks_.reserve(static_cast<size_t>(shape.max_rows / shape.block_size + 2) * max_seqs);
}

int32_t DraftModel::computed_prefix(std::span<const int32_t> block_table,
                                    int32_t n_positions) const {
  for (size_t i = 0; i < block_table.size(); ++i) {
    const auto block = static_cast<size_t>(block_table[i]);
    const int32_t start = static_cast<int32_t>(i) * block_size_;
    if (start >= n_positions) break;
    const int32_t rows =
        generation_[block] == blocks_.generation(block_table[i]) ? rows_[block] : 0;
    if (rows < block_size_) return std::min(start + rows, n_positions);
  }
  return std::min(n_positions, static_cast<int32_t>(block_table.size()) * block_size_);
}

void DraftModel::confirm(std::span<const int32_t> block_table, int32_t from, int32_t to) {
  for (int32_t pos = from; pos < to;) {
    const int32_t index = pos / block_size_;
    const int32_t start = index * block_size_;
    const int32_t end = std::min(to, start + block_size_) - start;
    const BlockId id = block_table[static_cast<size_t>(index)];
    const auto block = static_cast<size_t>(id);
    const uint32_t generation = blocks_.generation(id);
    const int32_t rows = generation_[block] == generation ? rows_[block] : 0;
    if (rows < pos - start) return;  // a gap before them: the rows stay unknown
    generation_[block] = generation;
    rows_[block] = std::max(rows, end);
    pos = start + end;
  }
}

void DraftModel::draft(std::span<const DraftJob> jobs) {
  assert(jobs.size() <= progress_.capacity());
  catch_up(jobs);
  int32_t longest = 0;
  for (const DraftJob& job : jobs) longest = std::max(longest, job.n_draft);
  // Guess i of each job comes from a pass over guess i - 1 (at the position after the pending
  // token's, plus i - 1).
  for (int32_t i = 1; i < longest; ++i) {
    batch_.clear();
    output_jobs_.clear();
    for (size_t j = 0; j < jobs.size(); ++j) {
      const DraftJob& job = jobs[j];
      if (job.n_draft <= i) continue;
      const auto pending = static_cast<int32_t>(job.tokens.size()) - 1;
      batch_.add_sequence(job.out + (i - 1), 1, pending + i, job.block_table, 1);
      output_jobs_.push_back(j);
    }
    run_pass();
    for (size_t row = 0; row < output_jobs_.size(); ++row)
      jobs[output_jobs_[row]].out[i] = guesses_[row];
  }
}

void DraftModel::catch_up(std::span<const DraftJob> jobs) {
  progress_.clear();
  for (const DraftJob& job : jobs) {
    assert(job.n_draft >= 1 && !job.tokens.empty());
    const auto n = static_cast<int32_t>(job.tokens.size());
    // The pending token is always computed: its row gives the first guess.
    progress_.push_back({std::min(computed_prefix(job.block_table, n), n - 1), 0});
  }
  for (;;) {
    batch_.clear();
    written_blocks_.clear();
    output_jobs_.clear();
    for (size_t j = 0; j < jobs.size(); ++j) {
      Progress& p = progress_[j];
      const auto n = static_cast<int32_t>(jobs[j].tokens.size());
      p.rows = p.next < n ? add_catch_up(jobs[j], p) : 0;
      if (p.rows > 0 && p.next + p.rows == n) output_jobs_.push_back(j);
    }
    if (batch_.sequences.empty()) return;
    run_pass();
    for (size_t row = 0; row < output_jobs_.size(); ++row)
      jobs[output_jobs_[row]].out[0] = guesses_[row];
    for (size_t j = 0; j < jobs.size(); ++j) {
      Progress& p = progress_[j];
      const auto n = static_cast<int32_t>(jobs[j].tokens.size());
      if (p.rows > 0) {
        // The rows computed are the sequence's own tokens: the draft's KV from now on.
        confirm(jobs[j].block_table, p.next, p.next + p.rows);
        p.next += p.rows;
      } else if (p.next < n) {  // it waited: another job may have computed its shared blocks
        p.next = std::max(p.next, std::min(computed_prefix(jobs[j].block_table, n), n - 1));
      }
    }
  }
}

int32_t DraftModel::add_catch_up(const DraftJob& job, const Progress& progress) {
  const auto n = static_cast<int32_t>(job.tokens.size());
  const int32_t room = max_rows_ - batch_.n_rows();
  if (room <= 0) return 0;
  const int32_t count = std::min(n - progress.next, room);
  const int32_t first_block = progress.next / block_size_;
  const int32_t last_block = (progress.next + count - 1) / block_size_;
  // Two sequences sharing a block (the same prompt prefix) would write its rows in the same pass:
  // the second one waits, and usually finds them computed afterwards.
  for (int32_t b = first_block; b <= last_block; ++b) {
    const int32_t id = job.block_table[static_cast<size_t>(b)];
    if (std::find(written_blocks_.begin(), written_blocks_.end(), id) != written_blocks_.end())
      return 0;
  }
  for (int32_t b = first_block; b <= last_block; ++b)
    written_blocks_.push_back(job.block_table[static_cast<size_t>(b)]);
  const bool last = progress.next + count == n;
  batch_.add_sequence(job.tokens.data() + progress.next, count, progress.next, job.block_table,
                      last ? 1 : 0);
  return count;
}

void DraftModel::run_pass() {
  model_->forward(batch_, kv_, workspace_, threads_, logits_.data());
  n_rows_computed_ += batch_.n_rows();
  const int64_t n_vocab = model_->hparams().n_vocab;
  guesses_.clear();
  for (size_t row = 0; row < batch_.output_rows.size(); ++row)
    guesses_.push_back(argmax(logits_.data() + row * static_cast<size_t>(n_vocab), n_vocab));
}

}  // namespace trellis
