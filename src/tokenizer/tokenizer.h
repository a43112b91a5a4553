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

class SpecialTokenSplitter;

// One piece of a text to encode, and whether CONTROL tokens spelled inside it become those tokens.
struct TextSegment {
  std::string_view text;
  bool parse_special = false;
};

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
  std::vector<TokenId> encode(std::string_view text, bool add_special, bool parse_special) const;

  // Encodes the concatenation of `segments` as one text, except that CONTROL tokens are matched
  // only inside segments with parse_special, and no token match crosses a segment boundary.
  // Plain text runs on across boundaries: it is split, merged and space-prefixed (SPM) exactly as
  // in the concatenated text. So the result equals encode(concatenation, add_special, true)
  // whenever no parse_special = false segment spells a CONTROL token and no token's text straddles
  // a boundary. This is how a chat prompt keeps user content from injecting control tokens.
  std::vector<TokenId> encode(std::span<const TextSegment> segments, bool add_special) const;

  // The bytes a token stands for (byte tokens become their byte, SPM's U+2581 a space, BPE's
  // byte-to-unicode mapping is undone). Control tokens yield "" unless `render_special`.
  virtual std::string token_to_piece(TokenId id, bool render_special = false) const = 0;

  // token_to_piece(id) without render_special, as a view into a table built once at creation
  // (so streaming text allocates nothing per token). Empty for ids outside the vocab.
  std::string_view piece(TokenId id) const;
  // The longest piece() in bytes.
  size_t max_piece_bytes() const { return max_piece_bytes_; }
  // The most text one token can add to a decoded stream: its piece's bytes, each non-ASCII byte
  // counted 3 times since it may turn out invalid and become a 3-byte U+FFFD (StreamDecoder).
  size_t max_decoded_bytes() const { return max_decoded_bytes_; }
  // The most input bytes one token can stand for (its piece, or a special token's text), so a
  // text of n bytes has at least n / max_text_bytes_per_token() tokens: what lets a caller refuse
  // a text too long for a context before paying for its tokenization. (A vocab without byte
  // tokens nor UNK drops unknown bytes, and is the exception: such a text may have fewer.)
  size_t max_text_bytes_per_token() const { return max_text_bytes_per_token_; }

  // Concatenated pieces of `ids`.
  std::string decode(std::span<const TokenId> ids, bool render_special = false) const;

  const Vocab& vocab() const { return vocab_; }

 protected:
  explicit Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}

  // A stretch of the text being encoded: one special token, or plain text in the byte range
  // [offset, offset + length) of that text.
  struct Fragment {
    TokenId token = kNoToken;  // kNoToken for plain text
    size_t offset = 0;
    size_t length = 0;
  };
  // Splits `text` into fragments, in order, covering it; plain fragments are non-empty.
  // USER_DEFINED tokens are always split out; CONTROL ones only when parse_special.
  virtual std::vector<Fragment> split_special(std::string_view text, bool parse_special) const = 0;
  // split_special for a tokenizer that finds its special tokens with `splitter`.
  static std::vector<Fragment> split_with(const SpecialTokenSplitter& splitter,
                                          std::string_view text, bool parse_special);
  // Tokens of `text` already split into `fragments` (as split_special makes them, but adjacent
  // plain fragments may have been merged), with BOS/EOS when add_special.
  virtual std::vector<TokenId> encode_fragments(std::string_view text,
                                                std::span<const Fragment> fragments,
                                                bool add_special) const = 0;

  Vocab vocab_;

 private:
  // Fills the piece table from token_to_piece (create() calls it once the tokenizer exists).
  void index_pieces();

  std::string piece_bytes_;              // every token's piece, concatenated in id order
  std::vector<uint32_t> piece_offsets_;  // [n_vocab + 1]: token i is [offsets[i], offsets[i + 1])
  size_t max_piece_bytes_ = 0;
  size_t max_decoded_bytes_ = 0;
  size_t max_text_bytes_per_token_ = 1;
};

// Turns a stream of tokens into text that is valid UTF-8 at every step: bytes of a character split
// over several tokens are held back until the character is complete.
class StreamDecoder {
 public:
  // pending_ is sized once for the longest piece plus a held-back partial character, the most it
  // ever holds, so push() never grows it.
  // The text of the `spelled` control tokens is output too (token_to_piece with render_special);
  // other control tokens yield none.
  explicit StreamDecoder(const Tokenizer& tokenizer, std::vector<TokenId> spelled = {})
      : tokenizer_(tokenizer), spelled_(std::move(spelled)) {
    pending_.reserve(tokenizer.max_piece_bytes() + 4);
  }
  // Text that became complete with this token (possibly empty).
  std::string push(TokenId id);
  // The same, appended to `out`: allocates nothing when `out` has room.
  void push(TokenId id, std::string& out);
  // Whatever is still held back, with incomplete sequences replaced by U+FFFD.
  std::string flush();
  void flush(std::string& out);

 private:
  const Tokenizer& tokenizer_;
  std::vector<TokenId> spelled_;
  std::string pending_;
};

}  // namespace trellis
