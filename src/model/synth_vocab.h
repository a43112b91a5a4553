// The project's own SentencePiece-style vocab for synthesized models: control tokens, 256 byte
// fallback tokens (so that any UTF-8 text tokenizes), then English-like pieces.
#pragma once

#include <cstdint>

#include "tokenizer/vocab.h"

namespace trellis {

// A vocab of exactly `n_vocab` tokens (n_vocab >= 300):
//   0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then pieces with scores falling by 1 each.
// Every prefix of a piece is itself a piece, so score-driven merging can reach every piece.
Vocab make_synth_vocab(int32_t n_vocab);

// A WordPiece (BERT) vocab of exactly `n_vocab` tokens (n_vocab >= 300) for synthesized
// encoders: 0 [PAD], 1 [UNK], 2 [CLS], 3 [SEP], 4 [MASK], then lowercase pieces that start a word
// (with the space mark) and that continue one, so that any ASCII text tokenizes without [UNK].
Vocab make_synth_wordpiece_vocab(int32_t n_vocab);

}  // namespace trellis
