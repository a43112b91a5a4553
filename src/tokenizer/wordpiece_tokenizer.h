// WordPiece tokenizer (tokenizer.ggml.model = "bert"): BERT's basic tokenizer, then the greedy
// longest-match of each word against the vocab.
#pragma once

#include <memory>

#include "tokenizer/tokenizer.h"

namespace trellis {

Result<std::unique_ptr<Tokenizer>> make_wordpiece_tokenizer(Vocab vocab);

}  // namespace trellis
