// The merge half of byte-level BPE: token lookup by text, merge ranks, and the merging of one
// pre-tokenized piece into token ids.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "tokenizer/vocab.h"

namespace trellis {

class BpeModel {
 public:
  struct Options {
    // Emit a piece that is itself a token directly, without merging (Llama 3's
    // `ignore_merges`; the merges could otherwise reach a different split of such a piece).
    bool ignore_merges = false;
  };

  // `vocab` must outlive the model: the lookup table points into its token strings.
  // Errors: a merge that is not "left right", or whose left, right or joined text is not a token.
  static Result<BpeModel> build(const Vocab& vocab, Options options);

  // The id of the token whose text is exactly `text`, or kNoToken.
  TokenId find_token(std::string_view text) const;

  // The work one encode_piece call did, counted so that tests can check its complexity without
  // timing it.
  struct Work {
    int64_t n_candidates = 0;  // merges pushed on the heap: at most (n - 1) + 2 per applied merge
    int64_t n_merges = 0;      // merges applied: at most n - 1
  };

  // Appends the tokens of one pre-tokenized piece (raw bytes; mapped through GPT-2's
  // byte-to-unicode table here) to `out`. A byte whose mapped character is not a token (a vocab
  // without all 256 byte tokens) becomes the vocab's unk token, or nothing if it has none.
  // Cost: O(n log n) in the piece's length n: fewer than 3n heap entries, each pushed and popped
  // once. `work`, when given, receives the counts.
  void encode_piece(std::string_view piece, std::vector<TokenId>& out, Work* work = nullptr) const;

  int32_t n_merges() const { return n_merges_; }

 private:
  struct Merge {
    int32_t rank;    // index in vocab.merges: lower merges first
    TokenId result;  // the token of left + right
  };

  // Both tables use open addressing with linear probing, a power-of-two capacity and a load of at
  // most 1/2. They are built once per load (a Llama 3 vocab has 128k tokens and 280k merges) and
  // probed per input byte; node-based maps spent most of the build chasing pointers.
  struct TokenSlot {
    uint32_t hash;  // low bits of the text's hash, checked before comparing texts
    TokenId id;     // kNoToken: empty slot
  };
  struct MergeSlot {
    uint64_t key;  // pair_key(left, right); kEmptyKey: empty slot
    Merge merge;
  };
  static constexpr uint64_t kEmptyKey = ~uint64_t{0};  // ids are >= 0, so no pair has this key

  static uint64_t pair_key(TokenId left, TokenId right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  BpeModel() = default;

  void insert_token(TokenId id);
  // False when the pair is already present (the earlier, lower rank is kept).
  bool insert_merge(TokenId left, TokenId right, Merge merge);
  const Merge* find_merge(TokenId left, TokenId right) const;

  const std::vector<std::string>* tokens_ = nullptr;  // the vocab's token texts
  std::vector<TokenSlot> token_slots_;
  std::vector<MergeSlot> merge_slots_;
  int32_t n_merges_ = 0;
  std::array<TokenId, 256> byte_tokens_{};  // raw byte -> its one-byte token
  TokenId unk_id_ = kNoToken;
  Options options_;
};

}  // namespace trellis
