#include "tokenizer/tokenizer.h"

#include <string>

#include "base/utf8.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/spm_tokenizer.h"

namespace trellis {
namespace {

// Checks what every tokenizer relies on, so that a hand-built Vocab fails as clearly as a file.
Status validate_vocab(const Vocab& vocab) {
  const size_t n_tokens = vocab.tokens.size();
  if (n_tokens == 0) return Error{"vocab has no tokens"};
  if (n_tokens > static_cast<size_t>(INT32_MAX)) return Error{"vocab has more than 2^31-1 tokens"};
  if (vocab.types.size() != n_tokens) {
    return Error{"vocab has " + std::to_string(vocab.types.size()) + " token types for " +
                 std::to_string(n_tokens) + " tokens"};
  }
  if (!vocab.scores.empty() && vocab.scores.size() != n_tokens) {
    return Error{"vocab has " + std::to_string(vocab.scores.size()) + " scores for " +
                 std::to_string(n_tokens) + " tokens"};
  }
  for (size_t i = 0; i < n_tokens; ++i) {
    auto code = static_cast<int32_t>(vocab.types[i]);
    if (code < static_cast<int32_t>(TokenType::UNDEFINED) ||
        code > static_cast<int32_t>(TokenType::BYTE)) {
      return Error{"token " + std::to_string(i) + " has token type " + std::to_string(code) +
                   " (valid: 0..6)"};
    }
  }
  const std::pair<const char*, TokenId> ids[] = {
      {"BOS", vocab.bos_id}, {"EOS", vocab.eos_id}, {"UNK", vocab.unk_id}, {"PAD", vocab.pad_id}};
  for (const auto& [name, id] : ids) {
    if (id != kNoToken && (id < 0 || id >= vocab.size())) {
      return Error{std::string(name) + " id " + std::to_string(id) + " is outside the vocab (" +
                   std::to_string(n_tokens) + " tokens)"};
    }
  }
  if (vocab.add_bos && vocab.bos_id == kNoToken) return Error{"add_bos is set but there is no BOS"};
  if (vocab.add_eos && vocab.eos_id == kNoToken) return Error{"add_eos is set but there is no EOS"};
  return ok_status();
}

// Copies `text`, replacing each byte that does not start a valid UTF-8 sequence by U+FFFD.
void append_sanitized(std::string& out, std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t start = pos;
    char32_t cp = decode_utf8(text, pos);
    if (cp == 0xFFFD && pos - start == 1) {
      append_utf8(out, cp);  // an invalid byte
    } else {
      out.append(text.substr(start, pos - start));
    }
  }
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::create(Vocab vocab) {
  TRELLIS_TRY(validate_vocab(vocab));
  switch (vocab.kind) {
    case TokenizerKind::SPM:
      return make_spm_tokenizer(std::move(vocab));
    case TokenizerKind::BPE:
      return make_bpe_tokenizer(std::move(vocab));
  }
  return Error{"unknown tokenizer kind for model '" + vocab.model + "'"};
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  return encode_fragments(text, split_special(text, parse_special), add_special);
}

//   joined:    |-- segment 0 --|---- segment 1 ----|-- segment 2 --|
//   fragments: |plain|==tok==|plain......plain|==tok==|plain.......|
//                            ^ plain runs of neighbouring segments merge into one fragment
std::vector<TokenId> Tokenizer::encode(std::span<const TextSegment> segments,
                                       bool add_special) const {
  std::string joined;
  std::vector<Fragment> fragments;
  for (const TextSegment& segment : segments) {
    const size_t base = joined.size();
    joined += segment.text;
    if (segment.text.empty()) continue;
    for (Fragment fragment : split_special(segment.text, segment.parse_special)) {
      if (fragment.token == kNoToken) {
        fragment.offset += base;
        if (fragment.length == 0) continue;
        if (!fragments.empty() && fragments.back().token == kNoToken &&
            fragments.back().offset + fragments.back().length == fragment.offset) {
          fragments.back().length += fragment.length;
          continue;
        }
      }
      fragments.push_back(fragment);
    }
  }
  return encode_fragments(joined, fragments, add_special);
}

// Plain concatenation: no leading space is stripped (an SPM encoding of "Hello" decodes to
// " Hello"), and no spaces are cleaned up around punctuation.
std::string Tokenizer::decode(std::span<const TokenId> ids, bool render_special) const {
  std::string text;
  for (TokenId id : ids) text += token_to_piece(id, render_special);
  return text;
}

// Invariant: pending_ holds at most the first 3 bytes of one unfinished UTF-8 sequence.
std::string StreamDecoder::push(TokenId id) {
  pending_ += tokenizer_.token_to_piece(id);
  const size_t complete = utf8_complete_prefix(pending_);
  std::string out;
  append_sanitized(out, std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return out;
}

// The held-back bytes are one incomplete sequence, so it becomes a single U+FFFD.
std::string StreamDecoder::flush() {
  std::string out;
  if (!pending_.empty()) append_utf8(out, 0xFFFD);
  pending_.clear();
  return out;
}

}  // namespace trellis
