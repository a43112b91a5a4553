// The tokenizer's vocabulary as GGUF stores it under `tokenizer.ggml.*`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/token_id.h"

namespace trellis {

class GgufFile;

// Values are GGUF's `tokenizer.ggml.token_type` codes.
enum class TokenType : int32_t {
  UNDEFINED = 0,
  NORMAL = 1,
  UNKNOWN = 2,
  CONTROL = 3,
  USER_DEFINED = 4,
  UNUSED = 5,
  BYTE = 6,
};

// `tokenizer.ggml.model`: "llama" is SentencePiece-style, "gpt2" byte-level BPE, "bert" WordPiece.
enum class TokenizerKind { SPM, BPE, WORDPIECE };

struct Vocab {
  TokenizerKind kind = TokenizerKind::SPM;
  std::string model;  // tokenizer.ggml.model as stored
  std::string pre;    // tokenizer.ggml.pre ("default" when absent)
  std::vector<std::string> tokens;
  std::vector<float> scores;        // empty or one per token
  std::vector<TokenType> types;     // one per token (NORMAL when absent in the file)
  std::vector<std::string> merges;  // BPE only: "left right" pairs, highest priority first
  TokenId bos_id = kNoToken;
  TokenId eos_id = kNoToken;
  TokenId unk_id = kNoToken;
  TokenId pad_id = kNoToken;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;  // SPM: prepend a space (the "dummy prefix") to the text

  int32_t size() const { return static_cast<int32_t>(tokens.size()); }
};

// The byte a BYTE token's text "<0xAB>" stands for (0xAB); nullopt for any other text.
std::optional<uint8_t> byte_token_value(std::string_view text);

// Reads the vocab of a GGUF file. Kind-specific defaults follow llama.cpp's conventions
// (SPM: add_bos and add_space_prefix true unless the file says otherwise).
Result<Vocab> load_vocab(const GgufFile& file);

}  // namespace trellis
