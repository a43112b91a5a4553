// The one struct handed to the forward pass: a flat list of tokens from one or more sequences,
// prefill chunks and single decode tokens alike.
//
//   rows:      | seq 0: prefill chunk (positions 5..9) | seq 1: decode (pos 41) | seq 2: ... |
//   sequences: {rows [0,5), blocks of seq 0}, {rows [5,6), blocks of seq 1}, ...
//
// A token at position p of a sequence attends to that sequence's positions [0, p]; its own key and
// value are written to block block_table[p / B], slot p % B before attention reads them. Positions
// below the chunk's first one must already be in the KV cache (computed earlier or shared).
//
// The engine fills one ForwardBatch per step and reuses it: clear() keeps every vector's capacity
// and block tables are views of the sequences' own tables, so a step adds no heap allocation once
// the batch has seen its largest shape.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/token_id.h"

namespace trellis {

struct BatchSequence {
  int32_t row_begin = 0;  // this sequence's rows are [row_begin, row_end), positions consecutive
  int32_t row_end = 0;
  // Block ids covering positions [0, last position]: a view of the sequence's table, which must
  // stay unchanged (and alive) until the forward pass has run.
  std::span<const int32_t> block_table;
};

struct ForwardBatch {
  std::vector<TokenId> tokens;     // [n_rows]
  std::vector<int32_t> positions;  // [n_rows]
  std::vector<BatchSequence> sequences;
  std::vector<int32_t> output_rows;  // rows whose logits are wanted, in output order

  int32_t n_rows() const { return static_cast<int32_t>(tokens.size()); }
  // Room for batches of up to max_rows tokens from max_sequences sequences (logits for every
  // row at most), so that filling them never allocates.
  void reserve(int32_t max_rows, int32_t max_sequences) {
    tokens.reserve(static_cast<size_t>(max_rows));
    positions.reserve(static_cast<size_t>(max_rows));
    output_rows.reserve(static_cast<size_t>(max_rows));
    sequences.reserve(static_cast<size_t>(max_sequences));
  }
  void clear() {
    tokens.clear();
    positions.clear();
    sequences.clear();
    output_rows.clear();
  }
  // Appends `n` tokens of one sequence starting at `first_position`; the last n_output_rows of them
  // (0: none, 1: the last, n: all) are added to output_rows. Precondition: n_output_rows <= n.
  void add_sequence(const TokenId* ids, int32_t n, int32_t first_position,
                    std::span<const int32_t> block_table, int32_t n_output_rows) {
    BatchSequence seq;
    seq.row_begin = n_rows();
    for (int32_t i = 0; i < n; ++i) {
      tokens.push_back(ids[i]);
      positions.push_back(first_position + i);
    }
    seq.row_end = n_rows();
    seq.block_table = block_table;
    sequences.push_back(seq);
    for (int32_t row = n_rows() - n_output_rows; row < n_rows(); ++row) output_rows.push_back(row);
  }
};

}  // namespace trellis
