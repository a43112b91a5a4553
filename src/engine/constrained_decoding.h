// Grammar-constrained decoding as the engine loop applies it: each constrained request carries a
// GrammarCursor (its grammar's token view and its automaton state). Before sampling, the cursor
// masks the row's logits to the tokens the grammar allows (stop tokens only where the output may
// end); after sampling it advances by the token. Where the grammar admits one continuation only,
// forced_tokens() gives its tokens so that they are appended as one prefill chunk (jump-forward)
// instead of being sampled one step at a time.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/token_id.h"
#include "grammar/grammar.h"
#include "grammar/token_grammar.h"
#include "tokenizer/tokenizer.h"

namespace trellis {

class GrammarCursor {
 public:
  enum class Advance { CONTINUE, COMPLETE, FAILED };

  explicit GrammarCursor(std::shared_ptr<TokenGrammar> grammar)
      : grammar_(std::move(grammar)), state_(grammar_->initial()) {}

  // Copies `row` into `masked` with every token the grammar refuses at -inf; `stop_tokens` are
  // allowed exactly where the output may end. False when no token at all is allowed (a vocabulary
  // that cannot spell what the grammar demands) or the grammar overflowed its state bound.
  bool mask(std::span<const float> row, std::span<const TokenId> stop_tokens,
            std::vector<float>& masked);
  // Moves past `token` (one the mask allowed; a stop token leaves the state as it is).
  // COMPLETE: nothing can follow, the output is done.
  Advance advance(TokenId token);
  // The tokens of the only continuation the grammar allows from here (up to max_bytes of it),
  // longest pieces first, less the last token (which might have merged with what comes after
  // it). Empty when the continuation is not unique. Does not move the cursor.
  std::vector<TokenId> forced_tokens(size_t max_bytes) const;

  bool is_accepting() const { return grammar_->is_accepting(state_); }
  const TokenGrammar& grammar() const { return *grammar_; }

 private:
  std::shared_ptr<TokenGrammar> grammar_;
  TokenGrammar::StateId state_;
};

// The token views of the grammars in use, keyed by grammar, least recently used dropped past
// `max_grammars` (cursors keep theirs alive). Thread-safe: requests take cursors on the
// submitting threads; a TokenGrammar itself is used on the engine loop only.
class GrammarRegistry {
 public:
  // 16 grammars of at most 512 cached masks each: ~160 MB at most for a 152k vocabulary.
  explicit GrammarRegistry(const Tokenizer& tokenizer, size_t max_grammars = 16)
      : tokenizer_(tokenizer), max_grammars_(max_grammars) {}

  GrammarCursor cursor(const std::shared_ptr<const Grammar>& grammar);

 private:
  struct Entry {
    std::shared_ptr<const Grammar> grammar;  // keeps the key's address from being reused
    std::shared_ptr<TokenGrammar> tokens;
  };

  const Tokenizer& tokenizer_;
  size_t max_grammars_;
  std::mutex mutex_;
  std::shared_ptr<const TokenTrie> trie_;  // built on first use
  std::list<Entry> entries_;               // most recently used first
};

}  // namespace trellis
