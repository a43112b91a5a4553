#include "tokenizer/wordpiece_tokenizer.h"

#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/utf8.h"
#include "tokenizer/bpe_special_tokens.h"
#include "tokenizer/unicode_props.h"

namespace trellis {
namespace {

// GGUF WordPiece vocabs mark the first piece of a word with U+2581 where BERT's own files mark
// the others with "##": "▁hello", "hrer".
constexpr std::string_view kWordStart = "\xE2\x96\x81";

// The CJK ideograph blocks that BERT splits character by character.
bool is_cjk(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// A character that is a word of its own: punctuation, ASCII symbols ($, +, <, ...), ideographs.
bool stands_alone(uint32_t cp) {
  return unicode::is_punctuation(cp) || (cp < 0x80 && unicode::is_symbol(cp)) || is_cjk(cp);
}

// BERT's basic tokenizer (uncased): decomposed (NFD), accents dropped, lowercased, split at
// whitespace, with punctuation and ideographs as words of their own; NUL, U+FFFD and control
// characters are dropped.
std::vector<std::string> basic_words(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  auto end_word = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  std::vector<uint32_t> decomposed;
  for (size_t pos = 0; pos < text.size();) {
    decomposed.clear();
    unicode::append_decomposition(static_cast<uint32_t>(decode_utf8(text, pos)), decomposed);
    for (uint32_t cp : decomposed) {
      if (unicode::is_space(cp)) {
        end_word();
      } else if (cp == 0 || cp == 0xFFFD || unicode::is_control(cp) ||
                 unicode::is_nonspacing_mark(cp)) {
        continue;
      } else if (stands_alone(cp)) {
        end_word();
        append_utf8(word, static_cast<char32_t>(cp));
        end_word();
      } else {
        append_utf8(word, static_cast<char32_t>(unicode::to_lower(cp)));
      }
    }
  }
  end_word();
  return words;
}

class WordPieceTokenizer final : public Tokenizer {
 public:
  // The members below keep views into vocab_: built once it sits at its final address.
  explicit WordPieceTokenizer(Vocab vocab) : Tokenizer(std::move(vocab)), special_(vocab_) {
    for (TokenId id = 0; id < vocab_.size(); ++id) {
      const std::string& text = vocab_.tokens[static_cast<size_t>(id)];
      ids_.emplace(text, id);  // the first of duplicate texts wins
      max_token_bytes_ = std::max(max_token_bytes_, text.size());
    }
  }

  std::string token_to_piece(TokenId id, bool render_special) const override {
    if (id < 0 || id >= vocab_.size()) return {};
    const std::string& text = vocab_.tokens[static_cast<size_t>(id)];
    switch (vocab_.types[static_cast<size_t>(id)]) {
      case TokenType::CONTROL:
      case TokenType::UNKNOWN:
      case TokenType::UNUSED:
        return render_special ? text : std::string();
      default:
        break;
    }
    if (text.rfind(kWordStart, 0) == 0) return " " + text.substr(kWordStart.size());
    return text;
  }

 protected:
  std::vector<Fragment> split_special(std::string_view text, bool parse_special) const override {
    return split_with(special_, text, parse_special);
  }

  std::vector<TokenId> encode_fragments(std::string_view text, std::span<const Fragment> fragments,
                                        bool add_special) const override {
    std::vector<TokenId> out;
    if (add_special && vocab_.add_bos && vocab_.bos_id != kNoToken) out.push_back(vocab_.bos_id);
    for (const Fragment& fragment : fragments) {
      if (fragment.token != kNoToken) {
        out.push_back(fragment.token);
        continue;
      }
      for (const std::string& word : basic_words(text.substr(fragment.offset, fragment.length)))
        encode_word(word, out);
    }
    if (add_special && vocab_.add_eos && vocab_.eos_id != kNoToken) out.push_back(vocab_.eos_id);
    return out;
  }

 private:
  // The longest vocab pieces from the word's start on, the first marked as a word start; a word
  // that some position cannot continue is one unknown token (none without an UNK token).
  void encode_word(const std::string& word, std::vector<TokenId>& out) const {
    const std::string marked = std::string(kWordStart) + word;
    const size_t first = out.size();
    for (size_t pos = 0; pos < marked.size();) {
      TokenId found = kNoToken;
      size_t end = std::min(marked.size(), pos + max_token_bytes_);
      for (; end > pos; --end) {
        if (end < marked.size() && (static_cast<uint8_t>(marked[end]) & 0xC0) == 0x80) continue;
        const auto it = ids_.find(std::string_view(marked).substr(pos, end - pos));
        if (it != ids_.end()) {
          found = it->second;
          break;
        }
      }
      if (found == kNoToken) {
        out.resize(first);
        if (vocab_.unk_id != kNoToken) out.push_back(vocab_.unk_id);
        return;
      }
      out.push_back(found);
      pos = end;
    }
  }

  SpecialTokenSplitter special_;
  std::unordered_map<std::string_view, TokenId> ids_;
  size_t max_token_bytes_ = 0;
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> make_wordpiece_tokenizer(Vocab vocab) {
  if (vocab.kind != TokenizerKind::WORDPIECE) {
    return Error{"make_wordpiece_tokenizer: vocab of tokenizer model '" + vocab.model +
                 "' is not WordPiece"};
  }
  if (vocab.types.size() != vocab.tokens.size()) {
    return Error{"WordPiece vocab has " + std::to_string(vocab.tokens.size()) + " tokens but " +
                 std::to_string(vocab.types.size()) + " token types"};
  }
  return std::unique_ptr<Tokenizer>(std::make_unique<WordPieceTokenizer>(std::move(vocab)));
}

}  // namespace trellis
