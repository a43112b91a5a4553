// SentencePiece-style tokenizer (tokenizer.ggml.model = "llama").
#pragma once

#include <memory>

#include "tokenizer/tokenizer.h"

namespace trellis {

Result<std::unique_ptr<Tokenizer>> make_spm_tokenizer(Vocab vocab);

}  // namespace trellis
