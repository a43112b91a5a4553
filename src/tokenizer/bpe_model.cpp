#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "tokenizer/byte_unicode.h"

namespace trellis {
namespace {

uint32_t hash_text(std::string_view text) {
  return static_cast<uint32_t>(std::hash<std::string_view>{}(text));
}

// Mixes both ids so that neighbouring pairs spread over the table.
uint64_t hash_key(uint64_t key) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdULL;
  key ^= key >> 33;
  return key;
}

// Smallest power of two >= 2 * n (and >= 16).
size_t table_capacity(size_t n) {
  size_t capacity = 16;
  while (capacity < 2 * n) capacity *= 2;
  return capacity;
}

}  // namespace

void BpeModel::insert_token(TokenId id) {
  const std::string& text = (*tokens_)[static_cast<size_t>(id)];
  const uint32_t hash = hash_text(text);
  const size_t mask = token_slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    TokenSlot& slot = token_slots_[i];
    if (slot.id == kNoToken) {
      slot = {hash, id};
      return;
    }
    if (slot.hash == hash && (*tokens_)[static_cast<size_t>(slot.id)] == text) {
      slot.id = id;  // several tokens share a text (rare); the highest id wins, as in llama.cpp
      return;
    }
  }
}

TokenId BpeModel::find_token(std::string_view text) const {
  const uint32_t hash = hash_text(text);
  const size_t mask = token_slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const TokenSlot& slot = token_slots_[i];
    if (slot.id == kNoToken) return kNoToken;
    if (slot.hash == hash && (*tokens_)[static_cast<size_t>(slot.id)] == text) return slot.id;
  }
}

bool BpeModel::insert_merge(TokenId left, TokenId right, Merge merge) {
  const uint64_t key = pair_key(left, right);
  const size_t mask = merge_slots_.size() - 1;
  for (size_t i = hash_key(key) & mask;; i = (i + 1) & mask) {
    MergeSlot& slot = merge_slots_[i];
    if (slot.key == kEmptyKey) {
      slot = {key, merge};
      return true;
    }
    if (slot.key == key) return false;
  }
}

const BpeModel::Merge* BpeModel::find_merge(TokenId left, TokenId right) const {
  const uint64_t key = pair_key(left, right);
  const size_t mask = merge_slots_.size() - 1;
  for (size_t i = hash_key(key) & mask;; i = (i + 1) & mask) {
    const MergeSlot& slot = merge_slots_[i];
    if (slot.key == key) return &slot.merge;
    if (slot.key == kEmptyKey) return nullptr;
  }
}

Result<BpeModel> BpeModel::build(const Vocab& vocab, Options options) {
  BpeModel model;
  model.options_ = options;
  model.unk_id_ = vocab.unk_id;

  model.tokens_ = &vocab.tokens;
  model.token_slots_.assign(table_capacity(vocab.tokens.size()), TokenSlot{0, kNoToken});
  for (size_t id = 0; id < vocab.tokens.size(); ++id) model.insert_token(static_cast<TokenId>(id));

  for (int byte = 0; byte < 256; ++byte) {
    std::string mapped;
    append_byte_as_unicode(mapped, static_cast<uint8_t>(byte));
    model.byte_tokens_[byte] = model.find_token(mapped);
  }

  model.merge_slots_.assign(table_capacity(vocab.merges.size()), MergeSlot{kEmptyKey, Merge{}});
  std::string joined;
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const std::string& merge = vocab.merges[rank];
    // Token texts never contain a plain space (it is mapped to U+0120), so the first space
    // separates the two halves. Searching from 1 keeps a (hypothetical) leading space in `left`.
    size_t space = merge.find(' ', 1);
    if (space == std::string::npos) {
      return Error{"BPE merge #" + std::to_string(rank) + " '" + merge +
                   "' is not of the form 'left right'"};
    }
    std::string_view left(merge.data(), space);
    std::string_view right(merge.data() + space + 1, merge.size() - space - 1);
    joined.assign(left);
    joined.append(right);
    TokenId left_id = model.find_token(left);
    TokenId right_id = model.find_token(right);
    TokenId result_id = model.find_token(joined);
    if (left_id == kNoToken || right_id == kNoToken || result_id == kNoToken) {
      return Error{"BPE merge #" + std::to_string(rank) + " '" + merge +
                   "' names a text that is not a token of the vocab"};
    }
    // A repeated pair keeps its first (lowest) rank.
    if (model.insert_merge(left_id, right_id, Merge{static_cast<int32_t>(rank), result_id})) {
      ++model.n_merges_;
    }
  }
  return model;
}

void BpeModel::encode_piece(std::string_view piece, std::vector<TokenId>& out, Work* work) const {
  if (work != nullptr) *work = Work{};
  if (piece.empty()) return;
  if (options_.ignore_merges) {
    TokenId whole = find_token(bytes_to_unicode(piece));
    if (whole != kNoToken) {
      out.push_back(whole);
      return;
    }
  }

  // One symbol per byte at first, linked in text order; a merge rewrites the left symbol to the
  // joined token and unlinks the right one. Invariant: the linked symbols, read from symbol 0
  // (which is never unlinked), are the current tokenization of the piece.
  struct Symbol {
    TokenId id;    // kNoToken: a byte without a token, which never merges
    int32_t prev;  // -1 at the start
    int32_t next;  // -1 at the end
    bool linked;
  };
  const auto n = static_cast<int32_t>(piece.size());
  std::vector<Symbol> symbols(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    symbols[i] = {byte_tokens_[static_cast<uint8_t>(piece[i])], i - 1, i + 1 < n ? i + 1 : -1,
                  true};
  }

  // Candidate merges of adjacent symbols. Entries go stale when either symbol changes; they are
  // checked when popped (lazy deletion) instead of being removed from the heap.
  struct Candidate {
    int32_t rank;
    int32_t left;  // index of the left symbol; the right one is symbols[left].next
    TokenId left_id;
    TokenId right_id;
    TokenId result;
  };
  // Lowest rank first; among equal ranks the leftmost pair, as HF and llama.cpp do.
  auto later = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  };
  std::vector<Candidate> heap;
  heap.reserve(static_cast<size_t>(n));
  int64_t n_candidates = 0, n_merges = 0;
  auto consider = [&](int32_t left) {
    if (left < 0) return;
    int32_t right = symbols[left].next;
    if (right < 0) return;
    TokenId left_id = symbols[left].id;
    TokenId right_id = symbols[right].id;
    if (left_id == kNoToken || right_id == kNoToken) return;
    const Merge* merge = find_merge(left_id, right_id);
    if (merge == nullptr) return;
    heap.push_back({merge->rank, left, left_id, right_id, merge->result});
    std::push_heap(heap.begin(), heap.end(), later);
    ++n_candidates;
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    Candidate candidate = heap.back();
    heap.pop_back();
    Symbol& left = symbols[candidate.left];
    // Stale unless both symbols still hold the tokens the candidate was made from. Token texts
    // only grow by merging, so a symbol never returns to an earlier id.
    if (!left.linked || left.id != candidate.left_id || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    if (right.id != candidate.right_id) continue;

    ++n_merges;
    left.id = candidate.result;
    right.linked = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = candidate.left;
    consider(left.prev);
    consider(candidate.left);
  }
  if (work != nullptr) *work = Work{n_candidates, n_merges};

  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    TokenId id = symbols[i].id;
    if (id == kNoToken) id = unk_id_;
    if (id != kNoToken) out.push_back(id);
  }
}

}  // namespace trellis
