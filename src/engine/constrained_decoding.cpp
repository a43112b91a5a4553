#include "engine/constrained_decoding.h"

#include <algorithm>
#include <limits>

namespace trellis {

bool GrammarCursor::mask(std::span<const float> row, std::span<const TokenId> stop_tokens,
                         std::vector<float>& masked) {
  masked.assign(row.begin(), row.end());
  const TokenMask& allowed = grammar_->mask(state_);
  if (grammar_->automaton().overflowed()) return false;
  apply_token_mask(masked, allowed);
  const bool may_end = grammar_->is_accepting(state_);
  for (TokenId id : stop_tokens)
    masked[static_cast<size_t>(id)] =
        may_end ? row[static_cast<size_t>(id)] : -std::numeric_limits<float>::infinity();
  const bool any = std::any_of(allowed.begin(), allowed.end(), [](uint64_t w) { return w != 0; });
  return any || (may_end && !stop_tokens.empty());
}

GrammarCursor::Advance GrammarCursor::advance(TokenId token) {
  if (grammar_->trie().piece(token).empty()) return Advance::CONTINUE;  // a stop token
  const TokenGrammar::StateId next = grammar_->advance(state_, token);
  if (next < 0) return Advance::FAILED;
  state_ = next;
  return grammar_->is_final(state_) ? Advance::COMPLETE : Advance::CONTINUE;
}

std::vector<TokenId> GrammarCursor::forced_tokens(size_t max_bytes) const {
  std::string text;
  TokenGrammar::StateId state = state_;
  for (int byte; text.size() < max_bytes && (byte = grammar_->forced_byte(state)) >= 0;) {
    text += static_cast<char>(byte);
    state = grammar_->advance_bytes(state, std::string_view(&text.back(), 1));
    if (state < 0) return {};
  }
  // Longest pieces first: each one is a token the mask allows, so the model could have chosen
  // it. (The tokenizer's own encoding of the text could differ at a SentencePiece space prefix.)
  std::vector<TokenId> tokens;
  for (std::string_view rest = text; !rest.empty();) {
    const auto [token, length] = grammar_->trie().longest_prefix(rest);
    if (token == kNoToken) return {};
    tokens.push_back(token);
    rest.remove_prefix(length);
  }
  // The text's end is not a token boundary the model must respect unless the output ends there:
  // its last piece might have merged with what comes next.
  if (!tokens.empty() && !grammar_->is_final(state)) tokens.pop_back();
  return tokens;
}

GrammarCursor GrammarRegistry::cursor(const std::shared_ptr<const Grammar>& grammar) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!trie_) {
    std::vector<std::string_view> pieces;
    pieces.reserve(static_cast<size_t>(tokenizer_.vocab().size()));
    for (TokenId id = 0; id < tokenizer_.vocab().size(); ++id)
      pieces.push_back(tokenizer_.piece(id));
    trie_ = std::make_shared<const TokenTrie>(pieces);
  }
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [&](const Entry& e) { return e.grammar.get() == grammar.get(); });
  if (it == entries_.end()) {
    entries_.push_front({grammar, std::make_shared<TokenGrammar>(grammar, trie_)});
    if (entries_.size() > max_grammars_) entries_.pop_back();
  } else {
    entries_.splice(entries_.begin(), entries_, it);
  }
  return GrammarCursor(entries_.front().tokens);
}

}  // namespace trellis
