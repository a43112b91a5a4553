#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <string>

#include "base/utf8.h"
#include "tokenizer/bpe_special_tokens.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/spm_tokenizer.h"
#include "tokenizer/wordpiece_tokenizer.h"

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
  Result<std::unique_ptr<Tokenizer>> tokenizer =
      Error{"unknown tokenizer kind for model '" + vocab.model + "'"};
  switch (vocab.kind) {
    case TokenizerKind::SPM:
      tokenizer = make_spm_tokenizer(std::move(vocab));
      break;
    case TokenizerKind::BPE:
      tokenizer = make_bpe_tokenizer(std::move(vocab));
      break;
    case TokenizerKind::WORDPIECE:
      tokenizer = make_wordpiece_tokenizer(std::move(vocab));
      break;
  }
  if (tokenizer.ok()) (*tokenizer)->index_pieces();
  return tokenizer;
}

std::vector<Tokenizer::Fragment> Tokenizer::split_with(const SpecialTokenSplitter& splitter,
                                                       std::string_view text, bool parse_special) {
  std::vector<Fragment> out;
  for (const SpecialTokenSplitter::Fragment& piece : splitter.split(text, parse_special)) {
    out.push_back(
        {piece.token, static_cast<size_t>(piece.text.data() - text.data()), piece.text.size()});
  }
  return out;
}

void Tokenizer::index_pieces() {
  piece_offsets_.assign(1, 0);
  piece_offsets_.reserve(static_cast<size_t>(vocab_.size()) + 1);
  for (TokenId id = 0; id < vocab_.size(); ++id) {
    const std::string piece = token_to_piece(id);
    max_piece_bytes_ = std::max(max_piece_bytes_, piece.size());
    const auto non_ascii = static_cast<size_t>(
        std::count_if(piece.begin(), piece.end(), [](char c) { return (c & 0x80) != 0; }));
    max_decoded_bytes_ = std::max(max_decoded_bytes_, piece.size() + 2 * non_ascii);
    max_text_bytes_per_token_ =
        std::max({max_text_bytes_per_token_, piece.size(), token_to_piece(id, true).size(),
                  vocab_.tokens[static_cast<size_t>(id)].size()});
    piece_bytes_ += piece;
    piece_offsets_.push_back(static_cast<uint32_t>(piece_bytes_.size()));
  }
}

std::string_view Tokenizer::piece(TokenId id) const {
  if (id < 0 || static_cast<size_t>(id) + 1 >= piece_offsets_.size()) return {};
  const uint32_t begin = piece_offsets_[static_cast<size_t>(id)];
  const uint32_t end = piece_offsets_[static_cast<size_t>(id) + 1];
  return std::string_view(piece_bytes_).substr(begin, end - begin);
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
  std::string out;
  push(id, out);
  return out;
}

void StreamDecoder::push(TokenId id, std::string& out) {
  if (std::find(spelled_.begin(), spelled_.end(), id) != spelled_.end()) {
    pending_ += tokenizer_.token_to_piece(id, /*render_special=*/true);
  } else {
    pending_ += tokenizer_.piece(id);
  }
  const size_t complete = utf8_complete_prefix(pending_);
  append_sanitized(out, std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
}

std::string StreamDecoder::flush() {
  std::string out;
  flush(out);
  return out;
}

// The held-back bytes are one incomplete sequence, so it becomes a single U+FFFD.
void StreamDecoder::flush(std::string& out) {
  if (!pending_.empty()) append_utf8(out, 0xFFFD);
  pending_.clear();
}

}  // namespace trellis
