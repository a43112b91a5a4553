// Opens a GGUF file and builds its tokenizer, for the subcommands that tokenize.
#pragma once

#include <memory>
#include <string>

#include "base/result.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace trellis::cli {

inline Result<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& path) {
  Result<GgufFile> file = GgufFile::open(path);
  if (!file.ok()) return file.error();
  Result<Vocab> vocab = load_vocab(*file);
  if (!vocab.ok()) return vocab.error();
  return Tokenizer::create(std::move(vocab).value());
}

}  // namespace trellis::cli
