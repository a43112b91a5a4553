#include "tokenizer/vocab.h"

#include <cstdint>
#include <string_view>

#include "gguf/gguf_file.h"

namespace trellis {
namespace {

// GGUF stores "no such token" as the uint32 0xFFFFFFFF (some writers as int32 -1).
constexpr int64_t kGgufNoToken = 0xFFFFFFFF;

Error vocab_error(const GgufFile& file, const std::string& what) {
  return Error{file.name() + ": " + what};
}

// Reads an array of strings; every item must be a string.
Result<std::vector<std::string>> read_string_array(const GgufFile& file, std::string_view key) {
  Result<const GgufArray*> array = file.get_array(key);
  if (!array.ok()) return array.error();
  if ((*array)->item_type != GgufType::STRING) {
    return vocab_error(file, std::string(key) + " must be an array of strings, not of " +
                                 std::string(gguf_type_name((*array)->item_type)));
  }
  std::vector<std::string> out;
  out.reserve((*array)->items.size());
  for (const GgufValue& item : (*array)->items) out.push_back(std::get<std::string>(item.storage));
  return out;
}

Result<std::vector<float>> read_scores(const GgufFile& file, std::string_view key) {
  Result<const GgufArray*> array = file.get_array(key);
  if (!array.ok()) return array.error();
  std::vector<float> out;
  out.reserve((*array)->items.size());
  for (const GgufValue& item : (*array)->items) {
    if (!item.is_float()) {
      return vocab_error(file, std::string(key) + " must be an array of floats, not of " +
                                   std::string(gguf_type_name(item.type())));
    }
    out.push_back(static_cast<float>(item.as_double()));
  }
  return out;
}

Result<std::vector<TokenType>> read_types(const GgufFile& file, std::string_view key) {
  Result<const GgufArray*> array = file.get_array(key);
  if (!array.ok()) return array.error();
  std::vector<TokenType> out;
  out.reserve((*array)->items.size());
  for (size_t i = 0; i < (*array)->items.size(); ++i) {
    const GgufValue& item = (*array)->items[i];
    int64_t code = 0;
    if (!item.is_integer() || !item.as_int64(&code)) {
      return vocab_error(file, std::string(key) + " must be an array of integers, not of " +
                                   std::string(gguf_type_name(item.type())));
    }
    if (code < static_cast<int64_t>(TokenType::UNDEFINED) ||
        code > static_cast<int64_t>(TokenType::BYTE)) {
      return vocab_error(file, std::string(key) + "[" + std::to_string(i) +
                                   "] = " + std::to_string(code) + " is not a token type (0..6)");
    }
    out.push_back(static_cast<TokenType>(code));
  }
  return out;
}

// Reads an optional special-token id into `id` (left unchanged when the key is absent).
// 0xFFFFFFFF (or -1) means "none"; any other id must name a token of the vocab.
Status read_token_id(const GgufFile& file, std::string_view key, int32_t n_tokens, TokenId& id) {
  if (!file.has(key)) return ok_status();
  Result<int64_t> value = file.get_int(key);
  if (!value.ok()) return value.error();
  if (*value == kGgufNoToken || *value == -1) {
    id = kNoToken;
    return ok_status();
  }
  if (*value < 0 || *value >= n_tokens) {
    return vocab_error(file, std::string(key) + " = " + std::to_string(*value) +
                                 " is outside the vocab (" + std::to_string(n_tokens) + " tokens)");
  }
  id = static_cast<TokenId>(*value);
  return ok_status();
}

// llama.cpp's BPE pre-tokenizer types that add BOS unless the file says otherwise
// (llama-vocab.cpp at c392e509: the llama3 family, falcon3, tekken and chameleon).
bool bpe_pre_adds_bos(std::string_view pre) {
  return pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "falcon3" ||
         pre == "tekken" || pre == "chameleon";
}

}  // namespace

Result<Vocab> load_vocab(const GgufFile& file) {
  Vocab vocab;
  Result<std::string> model = file.get_string("tokenizer.ggml.model");
  if (!model.ok()) return model.error();
  vocab.model = *model;
  if (vocab.model == "llama") {
    vocab.kind = TokenizerKind::SPM;
  } else if (vocab.model == "gpt2") {
    vocab.kind = TokenizerKind::BPE;
  } else if (vocab.model == "bert") {
    vocab.kind = TokenizerKind::WORDPIECE;
  } else {
    return vocab_error(file, "unsupported tokenizer model '" + vocab.model +
                                 "' (tokenizer.ggml.model; supported: 'llama' (SentencePiece), "
                                 "'gpt2' (byte-level BPE), 'bert' (WordPiece))");
  }
  Result<std::string> pre = file.get_string_or("tokenizer.ggml.pre", "default");
  if (!pre.ok()) return pre.error();
  vocab.pre = *pre;

  Result<std::vector<std::string>> tokens = read_string_array(file, "tokenizer.ggml.tokens");
  if (!tokens.ok()) return tokens.error();
  vocab.tokens = std::move(*tokens);
  if (vocab.tokens.empty()) return vocab_error(file, "tokenizer.ggml.tokens is empty");
  if (vocab.tokens.size() > static_cast<size_t>(INT32_MAX)) {
    return vocab_error(file, "tokenizer.ggml.tokens has more than 2^31-1 tokens");
  }
  const size_t n_tokens = vocab.tokens.size();

  if (file.has("tokenizer.ggml.scores")) {
    Result<std::vector<float>> scores = read_scores(file, "tokenizer.ggml.scores");
    if (!scores.ok()) return scores.error();
    if (scores->size() != n_tokens) {
      return vocab_error(file, "tokenizer.ggml.scores has " + std::to_string(scores->size()) +
                                   " entries but there are " + std::to_string(n_tokens) +
                                   " tokens");
    }
    vocab.scores = std::move(*scores);
  }

  if (file.has("tokenizer.ggml.token_type")) {
    Result<std::vector<TokenType>> types = read_types(file, "tokenizer.ggml.token_type");
    if (!types.ok()) return types.error();
    if (types->size() != n_tokens) {
      return vocab_error(file, "tokenizer.ggml.token_type has " + std::to_string(types->size()) +
                                   " entries but there are " + std::to_string(n_tokens) +
                                   " tokens");
    }
    vocab.types = std::move(*types);
  } else {
    vocab.types.assign(n_tokens, TokenType::NORMAL);
  }

  if (file.has("tokenizer.ggml.merges")) {
    Result<std::vector<std::string>> merges = read_string_array(file, "tokenizer.ggml.merges");
    if (!merges.ok()) return merges.error();
    vocab.merges = std::move(*merges);
  } else if (vocab.kind == TokenizerKind::BPE) {
    return vocab_error(file, "tokenizer.ggml.merges is missing (required by a 'gpt2' tokenizer)");
  }

  // Defaults as llama.cpp sets them before reading the keys. SPM: BOS 1, EOS 2, UNK 0 (the
  // SentencePiece layout), add BOS, add the space prefix. BPE: no space prefix, BOS only for the
  // pre-tokenizers listed in bpe_pre_adds_bos. (llama.cpp's BPE default ids 11/11 are Falcon's and
  // are not copied: a BPE file without the keys simply has no BOS/EOS.)
  const auto n = static_cast<int32_t>(n_tokens);
  if (vocab.kind == TokenizerKind::SPM) {
    auto if_present = [n](TokenId id) { return id < n ? id : kNoToken; };
    vocab.bos_id = if_present(1);
    vocab.eos_id = if_present(2);
    vocab.unk_id = if_present(0);
    vocab.add_bos = true;
    vocab.add_space_prefix = true;
  } else if (vocab.kind == TokenizerKind::BPE) {
    vocab.add_bos = bpe_pre_adds_bos(vocab.pre);
    vocab.add_space_prefix = false;
  }
  vocab.add_eos = false;
  if (vocab.kind == TokenizerKind::WORDPIECE) {
    // BERT's input is [CLS] text [SEP]; the tokens go by their texts unless the keys say.
    auto find = [&](std::string_view text) {
      for (size_t i = 0; i < n_tokens; ++i) {
        if (vocab.tokens[i] == text) return static_cast<TokenId>(i);
      }
      return kNoToken;
    };
    vocab.bos_id = find("[CLS]");
    vocab.eos_id = find("[SEP]");
    vocab.unk_id = find("[UNK]");
    vocab.pad_id = find("[PAD]");
    vocab.add_bos = true;
    vocab.add_eos = true;
  }

  TRELLIS_TRY(read_token_id(file, "tokenizer.ggml.bos_token_id", n, vocab.bos_id));
  TRELLIS_TRY(read_token_id(file, "tokenizer.ggml.eos_token_id", n, vocab.eos_id));
  TRELLIS_TRY(read_token_id(file, "tokenizer.ggml.unknown_token_id", n, vocab.unk_id));
  TRELLIS_TRY(read_token_id(file, "tokenizer.ggml.padding_token_id", n, vocab.pad_id));

  Result<bool> add_bos = file.get_bool_or("tokenizer.ggml.add_bos_token", vocab.add_bos);
  if (!add_bos.ok()) return add_bos.error();
  vocab.add_bos = *add_bos;
  Result<bool> add_eos = file.get_bool_or("tokenizer.ggml.add_eos_token", vocab.add_eos);
  if (!add_eos.ok()) return add_eos.error();
  vocab.add_eos = *add_eos;
  Result<bool> add_space_prefix =
      file.get_bool_or("tokenizer.ggml.add_space_prefix", vocab.add_space_prefix);
  if (!add_space_prefix.ok()) return add_space_prefix.error();
  vocab.add_space_prefix = *add_space_prefix;

  // A default cannot ask for a token the vocab lacks; an explicit key that does is an error.
  if (vocab.add_bos && vocab.bos_id == kNoToken) {
    if (file.has("tokenizer.ggml.add_bos_token")) {
      return vocab_error(file, "tokenizer.ggml.add_bos_token is true but there is no BOS token");
    }
    vocab.add_bos = false;
  }
  if (vocab.add_eos && vocab.eos_id == kNoToken) {
    if (file.has("tokenizer.ggml.add_eos_token")) {
      return vocab_error(file, "tokenizer.ggml.add_eos_token is true but there is no EOS token");
    }
    vocab.add_eos = false;
  }
  return vocab;
}

std::optional<uint8_t> byte_token_value(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return std::nullopt;
  int value = 0;
  for (char c : text.substr(3, 2)) {
    const int digit = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                             : -1;
    if (digit < 0) return std::nullopt;
    value = value * 16 + digit;
  }
  return static_cast<uint8_t>(value);
}

}  // namespace trellis
