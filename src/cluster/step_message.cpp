#include "cluster/step_message.h"

#include <algorithm>
#include <string>

namespace trellis {
namespace {

void encode_micro_batch(const ForwardBatch& batch, int32_t row_begin, int32_t row_end,
                        std::vector<int32_t>& words) {
  std::vector<const BatchSequence*> seqs;
  for (const BatchSequence& s : batch.sequences) {
    if (s.row_end > row_begin && s.row_begin < row_end) seqs.push_back(&s);
  }
  std::vector<int32_t> outputs;
  for (int32_t row : batch.output_rows) {
    if (row >= row_begin && row < row_end) outputs.push_back(row - row_begin);
  }
  const int32_t n_rows = row_end - row_begin;
  words.push_back(n_rows);
  words.push_back(static_cast<int32_t>(seqs.size()));
  words.push_back(static_cast<int32_t>(outputs.size()));
  words.insert(words.end(), batch.tokens.begin() + row_begin, batch.tokens.begin() + row_end);
  words.insert(words.end(), batch.positions.begin() + row_begin,
               batch.positions.begin() + row_end);
  for (const BatchSequence* s : seqs) {
    words.push_back(std::max(s->row_begin, row_begin) - row_begin);
    words.push_back(std::min(s->row_end, row_end) - row_begin);
    words.push_back(static_cast<int32_t>(s->block_table.size()));
    words.insert(words.end(), s->block_table.begin(), s->block_table.end());
  }
  words.insert(words.end(), outputs.begin(), outputs.end());
}

// Reads words in order, failing once the message runs out.
class WordReader {
 public:
  explicit WordReader(std::span<const int32_t> words) : words_(words) {}
  bool read(int32_t& out) {
    if (at_ >= words_.size()) return false;
    out = words_[at_++];
    return true;
  }
  bool read_n(int32_t n, std::vector<int32_t>& out) {
    if (n < 0 || static_cast<size_t>(n) > words_.size() - at_) return false;
    out.assign(words_.begin() + static_cast<std::ptrdiff_t>(at_),
               words_.begin() + static_cast<std::ptrdiff_t>(at_ + static_cast<size_t>(n)));
    at_ += static_cast<size_t>(n);
    return true;
  }
  bool done() const { return at_ == words_.size(); }

 private:
  std::span<const int32_t> words_;
  size_t at_ = 0;
};

Status decode_micro_batch(WordReader& in, int32_t n_blocks, int32_t max_rows, MicroBatch& mb) {
  const Error bad{"malformed step message"};
  int32_t n_rows = 0, n_seqs = 0, n_out = 0;
  if (!in.read(n_rows) || !in.read(n_seqs) || !in.read(n_out)) return bad;
  if (n_rows < 1 || n_rows > max_rows || n_seqs < 1 || n_seqs > n_rows || n_out < 0 ||
      n_out > n_rows)
    return bad;
  ForwardBatch& b = mb.batch;
  b.clear();
  if (!in.read_n(n_rows, b.tokens) || !in.read_n(n_rows, b.positions)) return bad;
  // Block ids first, into one vector; the sequences' views are taken once it stops growing.
  std::vector<int32_t> table;
  std::vector<int32_t> table_sizes;
  mb.blocks.clear();
  int32_t next_row = 0;
  for (int32_t s = 0; s < n_seqs; ++s) {
    BatchSequence seq;
    int32_t n_table = 0;
    if (!in.read(seq.row_begin) || !in.read(seq.row_end) || !in.read(n_table)) return bad;
    if (seq.row_begin != next_row || seq.row_end <= seq.row_begin || seq.row_end > n_rows)
      return bad;
    next_row = seq.row_end;
    if (!in.read_n(n_table, table)) return bad;
    for (int32_t block : table) {
      if (block < 0 || block >= n_blocks) return bad;
    }
    mb.blocks.insert(mb.blocks.end(), table.begin(), table.end());
    table_sizes.push_back(n_table);
    b.sequences.push_back(seq);
  }
  if (next_row != n_rows) return bad;
  if (!in.read_n(n_out, b.output_rows)) return bad;
  for (int32_t row : b.output_rows) {
    if (row < 0 || row >= n_rows) return bad;
  }
  size_t at = 0;
  for (size_t s = 0; s < b.sequences.size(); ++s) {
    b.sequences[s].block_table = std::span<const int32_t>(mb.blocks).subspan(
        at, static_cast<size_t>(table_sizes[s]));
    at += static_cast<size_t>(table_sizes[s]);
  }
  return {};
}

}  // namespace

void encode_step(const ForwardBatch& batch, std::span<const BlockCopy> copies, int32_t n_micro,
                 std::vector<int32_t>& words) {
  words.push_back(static_cast<int32_t>(StageCommand::STEP));
  words.push_back(static_cast<int32_t>(copies.size()));
  for (const BlockCopy& c : copies) words.insert(words.end(), {c.src, c.dst, c.n_slots});
  const int32_t n_rows = batch.n_rows();
  const int32_t n = std::clamp(n_micro, 1, std::max(n_rows, 1));
  words.push_back(n);
  for (int32_t m = 0; m < n; ++m) {
    encode_micro_batch(batch, static_cast<int32_t>(int64_t{n_rows} * m / n),
                       static_cast<int32_t>(int64_t{n_rows} * (m + 1) / n), words);
  }
}

Status decode_step(std::span<const int32_t> words, int32_t n_blocks, int32_t max_rows,
                   DecodedStep& step) {
  const Error bad{"malformed step message"};
  WordReader in(words);
  int32_t n_copies = 0;
  if (!in.read(n_copies) || n_copies < 0) return bad;
  step.copies.clear();
  for (int32_t i = 0; i < n_copies; ++i) {
    BlockCopy c;
    if (!in.read(c.src) || !in.read(c.dst) || !in.read(c.n_slots)) return bad;
    if (c.src < 0 || c.src >= n_blocks || c.dst < 0 || c.dst >= n_blocks || c.n_slots < 0)
      return bad;
    step.copies.push_back(c);
  }
  int32_t n_micro = 0;
  if (!in.read(n_micro) || n_micro < 1 || n_micro > max_rows) return bad;
  step.micro.resize(static_cast<size_t>(n_micro));
  for (MicroBatch& mb : step.micro) TRELLIS_TRY(decode_micro_batch(in, n_blocks, max_rows, mb));
  if (!in.done()) return bad;
  return {};
}

}  // namespace trellis
