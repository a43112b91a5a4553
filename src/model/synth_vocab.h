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

}  // namespace trellis
