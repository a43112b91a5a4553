// Byte-level BPE tokenizer (tokenizer.ggml.model = "gpt2") with per-model pre-tokenizers.
#pragma once

#include <memory>

#include "tokenizer/tokenizer.h"

namespace trellis {

Result<std::unique_ptr<Tokenizer>> make_bpe_tokenizer(Vocab vocab);

}  // namespace trellis
