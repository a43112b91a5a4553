// A grammar over a vocabulary: which tokens each automaton state allows (computed by one walk of
// the token trie, then cached per state), and the state after a token. One per distinct grammar,
// shared by the requests that use it; not thread-safe (the engine loop owns it).
//
// A token is allowed when the grammar accepts all of its bytes from the state (it may end inside
// a rule, or inside a multi-byte character). Tokens with an empty piece (control tokens, EOS) are
// never allowed here: whether a request may end is the caller's decision (is_accepting()).
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/token_id.h"
#include "grammar/grammar.h"
#include "grammar/grammar_automaton.h"
#include "grammar/token_trie.h"

namespace trellis {

// One bit per token id: bit (id % 64) of word id / 64.
using TokenMask = std::vector<uint64_t>;

inline bool mask_allows(const TokenMask& mask, TokenId id) {
  return (mask[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1;
}

struct TokenGrammarStats {
  int64_t n_masks_computed = 0;  // trie walks
  int64_t n_mask_hits = 0;       // masks served from the cache
  double compute_ms = 0;         // time in trie walks
};

class TokenGrammar {
 public:
  using StateId = GrammarAutomaton::StateId;

  // max_cached_masks bounds the memory of the mask cache (vocab_size / 8 bytes each); past it the
  // least recently used mask goes.
  TokenGrammar(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
               int32_t max_states = 1 << 16, int32_t max_cached_masks = 512);

  StateId initial() const { return automaton_.initial(); }
  // The tokens allowed from `state`. The reference stays valid until the next mask() call.
  const TokenMask& mask(StateId state);
  // The state after `token` (whose piece must be allowed), or kReject / kOverflow.
  StateId advance(StateId state, TokenId token);
  // The state after `bytes`.
  StateId advance_bytes(StateId state, std::string_view bytes) {
    return automaton_.advance(state, bytes);
  }
  bool is_accepting(StateId state) const { return automaton_.is_accepting(state); }
  bool is_final(StateId state) const { return automaton_.is_final(state); }
  // The only byte that may follow `state`, or -1 when there are several (or none).
  int forced_byte(StateId state) const;

  const TokenGrammarStats& stats() const { return stats_; }
  const TokenTrie& trie() const { return *trie_; }
  const GrammarAutomaton& automaton() const { return automaton_; }

 private:
  void compute_mask(StateId state, TokenMask& mask);

  GrammarAutomaton automaton_;
  std::shared_ptr<const TokenTrie> trie_;
  int32_t max_cached_masks_;
  struct CachedMask {
    TokenMask mask;
    std::list<StateId>::iterator use;  // its place in recent_
  };
  std::unordered_map<StateId, CachedMask> masks_;
  std::list<StateId> recent_;         // most recently used first
  std::vector<StateId> walk_states_;  // [max_depth + 1]: the state at each depth of the walk
  TokenGrammarStats stats_;
};

// Sets every logit whose token `mask` does not allow to -infinity.
void apply_token_mask(std::span<float> logits, const TokenMask& mask);

}  // namespace trellis
