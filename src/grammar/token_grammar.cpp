#include "grammar/token_grammar.h"

#include <algorithm>
#include <bit>
#include <limits>

namespace trellis {

TokenGrammar::TokenGrammar(std::shared_ptr<const Grammar> grammar,
                           std::shared_ptr<const TokenTrie> trie, int32_t max_states,
                           int32_t max_cached_masks)
    : automaton_(std::move(grammar), max_states),
      trie_(std::move(trie)),
      max_cached_masks_(std::max(max_cached_masks, 1)),
      walk_states_(static_cast<size_t>(trie_->max_depth()) + 1) {}

const TokenMask& TokenGrammar::mask(StateId state) {
  auto it = masks_.find(state);
  if (it != masks_.end()) {
    ++stats_.n_mask_hits;
    recent_.splice(recent_.begin(), recent_, it->second.use);
    return it->second.mask;
  }
  if (static_cast<int32_t>(masks_.size()) >= max_cached_masks_) {
    masks_.erase(recent_.back());
    recent_.pop_back();
  }
  recent_.push_front(state);
  CachedMask& cached = masks_[state];
  cached.use = recent_.begin();
  const auto start = std::chrono::steady_clock::now();
  compute_mask(state, cached.mask);
  stats_.compute_ms +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ++stats_.n_masks_computed;
  return cached.mask;
}

// One pass over the trie in depth-first order: walk_states_[d] is the state after the first d
// bytes of the current node's path. A refused byte skips the node's whole subtree.
void TokenGrammar::compute_mask(StateId state, TokenMask& mask) {
  mask.assign((static_cast<size_t>(trie_->vocab_size()) + 63) / 64, 0);
  const std::vector<TokenTrie::Node>& nodes = trie_->nodes();
  const std::vector<TokenId>& token_ids = trie_->token_ids();
  const size_t n_nodes = trie_->n_nodes();
  walk_states_[0] = state;
  // The table is read directly (the hot loop); only a transition not computed yet goes through
  // advance(), which may grow the table.
  const int32_t* table = automaton_.transition_table();
  const size_t n_classes = static_cast<size_t>(automaton_.n_byte_classes());
  for (size_t i = 0; i < n_nodes;) {
    const TokenTrie::Node& node = nodes[i];
    const StateId from = walk_states_[node.depth - 1u];
    StateId next = table[static_cast<size_t>(from) * n_classes + automaton_.byte_class(node.byte)];
    if (next == GrammarAutomaton::kUnknownTransition) {
      next = automaton_.advance(from, node.byte);
      table = automaton_.transition_table();
    }
    if (next < 0) {
      i = node.subtree_end;
      continue;
    }
    walk_states_[node.depth] = next;
    for (uint32_t t = node.tokens_begin; t < nodes[i + 1].tokens_begin; ++t)
      mask[static_cast<size_t>(token_ids[t]) >> 6] |= uint64_t{1} << (token_ids[t] & 63);
    ++i;
  }
}

TokenGrammar::StateId TokenGrammar::advance(StateId state, TokenId token) {
  const std::string_view piece = trie_->piece(token);
  if (piece.empty()) return GrammarAutomaton::kReject;
  return automaton_.advance(state, piece);
}

int TokenGrammar::forced_byte(StateId state) const {
  if (automaton_.is_accepting(state)) return -1;  // ending is an alternative
  const ByteSet& allowed = automaton_.allowed_bytes(state);
  return allowed.count() == 1 ? allowed.single() : -1;
}

void apply_token_mask(std::span<float> logits, const TokenMask& mask) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (size_t word = 0; word < mask.size(); ++word) {
    const size_t base = word * 64;
    if (base >= logits.size()) break;
    const size_t end = std::min(base + 64, logits.size());
    uint64_t refused = ~mask[word];
    if (end - base < 64) refused &= (uint64_t{1} << (end - base)) - 1;
    if (refused == ~uint64_t{0}) {  // a whole word refused: most of a narrow state's vocabulary
      std::fill(logits.begin() + static_cast<std::ptrdiff_t>(base),
                logits.begin() + static_cast<std::ptrdiff_t>(end), kNegInf);
      continue;
    }
    for (; refused != 0; refused &= refused - 1)
      logits[base + static_cast<size_t>(std::countr_zero(refused))] = kNegInf;
  }
}

}  // namespace trellis
