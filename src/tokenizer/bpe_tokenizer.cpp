#include "tokenizer/bpe_tokenizer.h"

#include <array>
#include <optional>
#include <utility>

#include "tokenizer/bpe_model.h"
#include "tokenizer/bpe_special_tokens.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/pre_tokenizer.h"

namespace trellis {
namespace {

// Pre types whose tokenizer emits a piece that is itself a token without merging it
// (llama.cpp's `ignore_merges`, HF's BPE option of the same name).
bool pre_type_ignores_merges(std::string_view pre) {
  constexpr std::array<std::string_view, 4> kIgnoreMerges = {"llama-bpe", "llama3", "llama-v3",
                                                             "falcon3"};
  for (std::string_view name : kIgnoreMerges) {
    if (name == pre) return true;
  }
  return false;
}

class BpeTokenizer final : public Tokenizer {
 public:
  // Two-step construction: the members below keep views into vocab_, so they are built only
  // once vocab_ sits at its final address inside this object.
  explicit BpeTokenizer(Vocab vocab) : Tokenizer(std::move(vocab)), special_(vocab_) {}

  Status init() {
    Result<PreTokenizer> pre = PreTokenizer::for_pre_type(vocab_.pre);
    if (!pre.ok()) return pre.error();
    pre_tokenizer_.emplace(std::move(pre).value());

    BpeModel::Options options;
    options.ignore_merges = pre_type_ignores_merges(vocab_.pre);
    Result<BpeModel> model = BpeModel::build(vocab_, options);
    if (!model.ok()) return model.error();
    model_.emplace(std::move(model).value());
    return ok_status();
  }

  std::string token_to_piece(TokenId id, bool render_special) const override {
    if (id < 0 || id >= vocab_.size()) return {};
    const std::string& text = vocab_.tokens[static_cast<size_t>(id)];
    TokenType type = static_cast<size_t>(id) < vocab_.types.size()
                         ? vocab_.types[static_cast<size_t>(id)]
                         : TokenType::NORMAL;
    switch (type) {
      case TokenType::CONTROL:
      case TokenType::UNKNOWN:
      case TokenType::UNUSED:
        return render_special ? text : std::string();
      case TokenType::USER_DEFINED:
        // Added tokens are stored as the raw text they stand for, not byte-mapped.
        return text;
      case TokenType::BYTE:
        if (std::optional<uint8_t> byte = byte_token_value(text)) {
          return std::string(1, static_cast<char>(*byte));
        }
        return text;
      case TokenType::NORMAL:
      case TokenType::UNDEFINED:
        break;
    }
    // A normal token's text is byte-mapped; one that is not (malformed vocab) is shown as is.
    std::optional<std::string> bytes = unicode_to_bytes(text);
    return bytes ? std::move(*bytes) : text;
  }

 protected:
  std::vector<Fragment> split_special(std::string_view text, bool parse_special) const override {
    return split_with(special_, text, parse_special);
  }

  std::vector<TokenId> encode_fragments(std::string_view text, std::span<const Fragment> fragments,
                                        bool add_special) const override {
    std::vector<TokenId> out;
    out.reserve(text.size() / 3 + 2);
    if (add_special && vocab_.add_bos && vocab_.bos_id != kNoToken) out.push_back(vocab_.bos_id);
    for (const Fragment& fragment : fragments) {
      if (fragment.token != kNoToken) {
        out.push_back(fragment.token);
        continue;
      }
      for (std::string_view piece :
           pre_tokenizer_->split(text.substr(fragment.offset, fragment.length))) {
        model_->encode_piece(piece, out);
      }
    }
    if (add_special && vocab_.add_eos && vocab_.eos_id != kNoToken) out.push_back(vocab_.eos_id);
    return out;
  }

 private:
  SpecialTokenSplitter special_;
  std::optional<PreTokenizer> pre_tokenizer_;  // set by init()
  std::optional<BpeModel> model_;              // set by init()
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> make_bpe_tokenizer(Vocab vocab) {
  if (vocab.kind != TokenizerKind::BPE) {
    return Error{"make_bpe_tokenizer: vocab of tokenizer model '" + vocab.model +
                 "' is not byte-level BPE"};
  }
  if (!vocab.types.empty() && vocab.types.size() != vocab.tokens.size()) {
    return Error{"BPE vocab has " + std::to_string(vocab.tokens.size()) + " tokens but " +
                 std::to_string(vocab.types.size()) + " token types"};
  }
  auto tokenizer = std::make_unique<BpeTokenizer>(std::move(vocab));
  Status status = tokenizer->init();
  if (!status.ok()) return status.error();
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

}  // namespace trellis
