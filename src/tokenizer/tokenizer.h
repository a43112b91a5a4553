// Text <-> token ids for a vocab: one interface, an SPM and a byte-level BPE implementation.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "tokenizer/vocab.h"

namespace trellis {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Builds the tokenizer that the vocab's kind calls for. Errors: unsupported model or
  // pre-tokenizer, inconsistent vocab (e.g. a merge naming an unknown token).
  static Result<std::unique_ptr<Tokenizer>> create(Vocab vocab);

  // add_special: BOS/EOS as the vocab's add_bos/add_eos say.
  // parse_special: text spelling a CONTROL token becomes that token; otherwise it is tokenized as
  // plain text. USER_DEFINED tokens are always matched in the text, as the reference tokenizers do
  // (some vocabs spell runs of spaces or single letters with them).
  virtual std::vector<TokenId> encode(std::string_view text, bool add_special,
                                      bool parse_special) const = 0;

  // The bytes a token stands for (byte tokens become their byte, SPM's U+2581 a space, BPE's
  // byte-to-unicode mapping is undone). Control tokens yield "" unless `render_special`.
  virtual std::string token_to_piece(TokenId id, bool render_special = false) const = 0;

  // Concatenated pieces of `ids`.
  std::string decode(std::span<const TokenId> ids, bool render_special = false) const;

  const Vocab& vocab() const { return vocab_; }

 protected:
  explicit Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}
  Vocab vocab_;
};

// Turns a stream of tokens into text that is valid UTF-8 at every step: bytes of a character split
// over several tokens are held back until the character is complete.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  // Text that became complete with this token (possibly empty).
  std::string push(TokenId id);
  // Whatever is still held back, with incomplete sequences replaced by U+FFFD.
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;
};

}  // namespace trellis
