// SentencePiece-style tokenization as llama.cpp performs it (llama-vocab.cpp, c392e509):
//
//   text ──split on special tokens──> fragments: raw text | token
//   raw text ──(space prefix) + escape ' ' as U+2581──> characters ──greedy pair merges──> pieces
//   piece in vocab ? its id : one byte token per byte
//
// Merging repeatedly joins the adjacent pair whose concatenation is a token with the highest score
// (ties: the leftmost pair). The result is the SentencePiece BPE encoding of the text.
#include "tokenizer/spm_tokenizer.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cstdint>
#include <functional>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace trellis {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581 "▁", SentencePiece's space

// String hashing that accepts string_view keys without building a std::string.
struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};
using TokenIndex = std::unordered_map<std::string, TokenId, TextHash, std::equal_to<>>;

// Byte length of the character that `lead` starts, as llama.cpp's unicode_len_utf8 counts it: by
// the top four bits, so a stray continuation byte is a 1-byte character and 0xF8..0xFF count 4.
size_t spm_char_length(uint8_t lead) {
  static constexpr std::array<uint8_t, 16> kByHighBits = {1, 1, 1, 1, 1, 1, 1, 1,
                                                          1, 1, 1, 1, 2, 2, 3, 4};
  return kByHighBits[lead >> 4];
}

// The character of `length` bytes at `text` as one number (its bytes, little-endian).
uint32_t char_code(const char* text, size_t length) {
  uint32_t code = 0;
  for (size_t i = 0; i < length; ++i)
    code |= static_cast<uint32_t>(static_cast<uint8_t>(text[i])) << (8 * i);
  return code;
}

class SpmTokenizer final : public Tokenizer {
 public:
  explicit SpmTokenizer(Vocab vocab) : Tokenizer(std::move(vocab)) {}

  Status init();

  std::string token_to_piece(TokenId id, bool render_special) const override;

 protected:
  std::vector<Fragment> split_special(std::string_view text, bool parse_special) const override;
  std::vector<TokenId> encode_fragments(std::string_view text, std::span<const Fragment> fragments,
                                        bool add_special) const override;

 private:
  TokenId find(std::string_view text) const {
    auto it = token_index_.find(text);
    return it == token_index_.end() ? kNoToken : it->second;
  }
  float score(TokenId id) const { return vocab_.scores.empty() ? 0.0f : vocab_.scores[id]; }

  void encode_raw(std::string_view raw, bool space_prefix, std::vector<TokenId>& out) const;
  struct MergeBuffers;
  void encode_chunk(std::string_view text, MergeBuffers& buffers, std::vector<TokenId>& out) const;
  // Whether the two adjacent characters occur side by side in some token's text: only then can
  // a merge join them.
  bool mergeable(uint32_t left, uint32_t right) const {
    return std::binary_search(mergeable_pairs_.begin(), mergeable_pairs_.end(),
                              pair_key(left, right));
  }
  static uint64_t pair_key(uint32_t left, uint32_t right) {
    return (static_cast<uint64_t>(left) << 32) | right;
  }

  TokenIndex token_index_;  // text -> id; for duplicate texts the highest id wins, as in llama.cpp
  std::array<TokenId, 256> byte_tokens_{};  // fallback token of each byte, kNoToken if none
  // CONTROL, USER_DEFINED and UNKNOWN tokens with non-empty text, longest text first (then by id).
  std::vector<TokenId> special_tokens_;
  std::vector<int16_t> byte_values_;  // per token: the byte a BYTE token stands for, else -1
  // Every pair of adjacent characters (char_code each) inside any token's text, sorted.
  std::vector<uint64_t> mergeable_pairs_;
};

Status SpmTokenizer::init() {
  const int32_t n_tokens = vocab_.size();
  token_index_.reserve(static_cast<size_t>(n_tokens));
  byte_values_.assign(static_cast<size_t>(n_tokens), -1);
  for (TokenId id = 0; id < n_tokens; ++id) {
    const std::string& text = vocab_.tokens[id];
    token_index_[text] = id;
    const TokenType type = vocab_.types[id];
    if (type == TokenType::BYTE) {
      const std::optional<uint8_t> value = byte_token_value(text);
      if (!value) {
        return Error{"byte token " + std::to_string(id) + " has text '" + text +
                     "' (expected <0xXX>)"};
      }
      byte_values_[id] = static_cast<int16_t>(*value);
    }
    if ((type == TokenType::CONTROL || type == TokenType::USER_DEFINED ||
         type == TokenType::UNKNOWN) &&
        !text.empty()) {
      special_tokens_.push_back(id);
    }
  }
  for (const std::string& text : vocab_.tokens) {
    uint32_t previous = 0;
    for (size_t offset = 0; offset < text.size();) {
      const size_t length =
          std::min(text.size() - offset, spm_char_length(static_cast<uint8_t>(text[offset])));
      const uint32_t code = char_code(text.data() + offset, length);
      if (offset > 0) mergeable_pairs_.push_back(pair_key(previous, code));
      previous = code;
      offset += length;
    }
  }
  std::sort(mergeable_pairs_.begin(), mergeable_pairs_.end());
  mergeable_pairs_.erase(std::unique(mergeable_pairs_.begin(), mergeable_pairs_.end()),
                         mergeable_pairs_.end());
  mergeable_pairs_.shrink_to_fit();
  std::sort(special_tokens_.begin(), special_tokens_.end(), [this](TokenId a, TokenId b) {
    size_t len_a = vocab_.tokens[a].size(), len_b = vocab_.tokens[b].size();
    return len_a != len_b ? len_a > len_b : a < b;
  });
  // Byte fallback as llama.cpp's byte_to_token: the "<0xXX>" token, else a token whose text is
  // the byte itself; beyond llama.cpp (which throws), the UNK token, else nothing.
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int byte = 0; byte < 256; ++byte) {
    const char name[] = {'<', '0', 'x', kHex[byte >> 4], kHex[byte & 15], '>'};
    TokenId id = find(std::string_view(name, sizeof(name)));
    if (id == kNoToken) id = find(std::string(1, static_cast<char>(byte)));
    if (id == kNoToken) id = vocab_.unk_id;
    byte_tokens_[byte] = id;
  }
  return ok_status();
}

// Splits `text` at occurrences of special tokens, the longest tokens first, each token splitting
// every raw fragment left by the longer ones at its leftmost non-overlapping occurrences.
// USER_DEFINED tokens are always split out; CONTROL and UNKNOWN ones only when parse_special
// (as llama.cpp's tokenizer_st_partition).
std::vector<Tokenizer::Fragment> SpmTokenizer::split_special(std::string_view text,
                                                             bool parse_special) const {
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back(Fragment{kNoToken, 0, text.size()});
  std::vector<Fragment> next;
  for (TokenId id : special_tokens_) {
    if (!parse_special && vocab_.types[id] != TokenType::USER_DEFINED) continue;
    const std::string& special = vocab_.tokens[id];
    next.clear();
    for (const Fragment& fragment : fragments) {
      if (fragment.token != kNoToken) {
        next.push_back(fragment);
        continue;
      }
      //   offset         pos          match     match + size       end
      //   |  emitted ... |  raw text  |  special  |  searched next ...|
      size_t pos = fragment.offset;
      const size_t end = fragment.offset + fragment.length;
      while (pos < end) {
        size_t match = text.substr(0, end).find(special, pos);
        if (match == std::string_view::npos) break;
        if (match > pos) next.push_back(Fragment{kNoToken, pos, match - pos});
        next.push_back(Fragment{id, 0, 0});
        pos = match + special.size();
      }
      if (pos < end) next.push_back(Fragment{kNoToken, pos, end - pos});
    }
    fragments.swap(next);
  }
  return fragments;
}

// One symbol of the merge list: the byte range [start, start + length) of the escaped text.
// A symbol absorbed into its left neighbour keeps length 0 and is unlinked.
struct Symbol {
  uint32_t start;
  uint32_t length;
  int32_t prev;  // -1 at the ends
  int32_t next;
};

// A candidate merge of two adjacent symbols. It is stale (skipped when popped) once either side
// has changed, which the length check detects since symbols only grow.
struct Bigram {
  float score;
  int32_t left;
  int32_t right;
  uint32_t length;  // of the concatenation when the candidate was made
};

// Priority: higher score first, then the leftmost pair.
struct BigramLess {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

// The merge state of one chunk, reused from chunk to chunk.
struct SpmTokenizer::MergeBuffers {
  std::vector<Symbol> symbols;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue;
};

// The escaped text is cut where two adjacent characters never occur side by side in a token: no
// merge can join them, so each piece merges on its own exactly as the whole would (merges of
// different pieces never compete: a candidate pair lies inside one piece, and the order within a
// piece, by score then leftmost, is the same). Natural text is cut at every word, so the merge
// state is that of one word, not of the whole text: memory stays a few times the input's bytes.
void SpmTokenizer::encode_raw(std::string_view raw, bool space_prefix,
                              std::vector<TokenId>& out) const {
  std::string text;
  text.reserve(raw.size() + 3);
  if (space_prefix) text += kSpaceMarker;
  for (char c : raw) {
    if (c == ' ') {
      text += kSpaceMarker;
    } else {
      text += c;
    }
  }
  // Symbols address the text with 32-bit offsets and indices.
  assert(text.size() < static_cast<size_t>(INT32_MAX) && "SPM input of 2 GiB or more");
  MergeBuffers buffers;
  size_t chunk_start = 0;
  uint32_t previous = 0;
  for (size_t offset = 0; offset < text.size();) {
    const size_t length =
        std::min(text.size() - offset, spm_char_length(static_cast<uint8_t>(text[offset])));
    const uint32_t code = char_code(text.data() + offset, length);
    if (offset > chunk_start && !mergeable(previous, code)) {
      encode_chunk(std::string_view(text).substr(chunk_start, offset - chunk_start), buffers, out);
      chunk_start = offset;
    }
    previous = code;
    offset += length;
  }
  encode_chunk(std::string_view(text).substr(chunk_start), buffers, out);
}

// Merges one chunk of escaped text: repeatedly the adjacent pair whose concatenation is the
// token of the highest score (ties: the leftmost pair).
void SpmTokenizer::encode_chunk(std::string_view text, MergeBuffers& buffers,
                                std::vector<TokenId>& out) const {
  std::vector<Symbol>& symbols = buffers.symbols;
  symbols.clear();
  symbols.reserve(text.size());
  for (size_t offset = 0; offset < text.size();) {
    size_t length =
        std::min(text.size() - offset, spm_char_length(static_cast<uint8_t>(text[offset])));
    auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back(
        Symbol{static_cast<uint32_t>(offset), static_cast<uint32_t>(length), index - 1, index + 1});
    offset += length;
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  auto& queue = buffers.queue;  // empty: every chunk's merging drains it
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const uint32_t length = symbols[left].length + symbols[right].length;
    TokenId id = find(text.substr(symbols[left].start, length));
    if (id == kNoToken) return;
    queue.push(Bigram{score(id), left, right, length});
  };
  for (size_t i = 1; i < symbols.size(); ++i) {
    try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
  }

  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    if (left.length == 0 || right.length == 0 || left.length + right.length != bigram.length) {
      continue;
    }
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add(left.prev, bigram.left);
    try_add(bigram.left, left.next);
  }

  // Every merged symbol is a token (merges only form tokens); a single character may not be, and
  // then falls back to its bytes. Symbol 0 is never absorbed, so the list starts there.
  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    const Symbol& symbol = symbols[i];
    std::string_view piece = text.substr(symbol.start, symbol.length);
    TokenId id = find(piece);
    if (id != kNoToken) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {
      TokenId byte_id = byte_tokens_[static_cast<uint8_t>(c)];
      if (byte_id != kNoToken) out.push_back(byte_id);
    }
  }
}

// As llama.cpp: an empty text yields no tokens (not even the space prefix); raw text gets the
// space prefix at the start of the input and after every special token split out of it.
std::vector<TokenId> SpmTokenizer::encode_fragments(std::string_view text,
                                                    std::span<const Fragment> fragments,
                                                    bool add_special) const {
  std::vector<TokenId> out;
  if (add_special && vocab_.add_bos) out.push_back(vocab_.bos_id);
  bool after_special = true;  // the start of the text counts as following a special token
  for (const Fragment& fragment : fragments) {
    if (fragment.token != kNoToken) {
      out.push_back(fragment.token);
      after_special = true;
      continue;
    }
    encode_raw(text.substr(fragment.offset, fragment.length),
               vocab_.add_space_prefix && after_special, out);
    after_special = false;
  }
  if (add_special && vocab_.add_eos) out.push_back(vocab_.eos_id);
  return out;
}

// As llama.cpp's token_to_piece for SPM: NORMAL pieces with U+2581 turned into spaces, BYTE
// tokens as their byte, USER_DEFINED as their text; CONTROL and UNKNOWN as their text only when
// rendering specials (else ""); UNUSED, UNDEFINED and ids outside the vocab as "".
std::string SpmTokenizer::token_to_piece(TokenId id, bool render_special) const {
  if (id < 0 || id >= vocab_.size()) return {};
  const std::string& text = vocab_.tokens[id];
  switch (vocab_.types[id]) {
    case TokenType::NORMAL: {
      std::string piece;
      piece.reserve(text.size());
      for (size_t pos = 0; pos < text.size();) {
        if (text.compare(pos, kSpaceMarker.size(), kSpaceMarker) == 0) {
          piece += ' ';
          pos += kSpaceMarker.size();
        } else {
          piece += text[pos++];
        }
      }
      return piece;
    }
    case TokenType::BYTE:
      return std::string(1, static_cast<char>(byte_values_[id]));
    case TokenType::USER_DEFINED:
      return text;
    case TokenType::CONTROL:
    case TokenType::UNKNOWN:
      return render_special ? text : std::string();
    case TokenType::UNUSED:
    case TokenType::UNDEFINED:
      return {};
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> make_spm_tokenizer(Vocab vocab) {
  if (vocab.kind != TokenizerKind::SPM) {
    return Error{"make_spm_tokenizer: vocab of model '" + vocab.model + "' is not SentencePiece"};
  }
  if (vocab.types.size() != vocab.tokens.size() ||
      (!vocab.scores.empty() && vocab.scores.size() != vocab.tokens.size())) {
    return Error{"make_spm_tokenizer: token types/scores do not match the number of tokens"};
  }
  auto tokenizer = std::make_unique<SpmTokenizer>(std::move(vocab));
  TRELLIS_TRY(tokenizer->init());
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

}  // namespace trellis
