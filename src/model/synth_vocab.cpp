#include "model/synth_vocab.h"

#include <array>
#include <cassert>
#include <cstdio>
#include <string_view>
#include <unordered_set>

namespace trellis {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581, SPM's escaped space

// Frequent English words: their pieces come first so common text gets short tokenizations.
constexpr std::array<std::string_view, 120> kCommonWords = {
    "the",   "of",    "and",    "to",    "a",     "in",     "is",     "you",  "that",   "it",
    "he",    "was",   "for",    "on",    "are",   "as",     "with",   "his",  "they",   "I",
    "at",    "be",    "this",   "have",  "from",  "or",     "one",    "had",  "by",     "word",
    "but",   "not",   "what",   "all",   "were",  "we",     "when",   "your", "can",    "said",
    "there", "use",   "an",     "each",  "which", "she",    "do",     "how",  "their",  "if",
    "will",  "up",    "other",  "about", "out",   "many",   "then",   "them", "these",  "so",
    "some",  "her",   "would",  "make",  "like",  "him",    "into",   "time", "has",    "look",
    "two",   "more",  "write",  "go",    "see",   "number", "no",     "way",  "could",  "people",
    "my",    "than",  "first",  "water", "been",  "call",   "who",    "oil",  "its",    "now",
    "find",  "long",  "down",   "day",   "did",   "get",    "come",   "made", "may",    "part",
    "Once",  "upon",  "little", "girl",  "named", "Lily",   "happy",  "play", "friend", "mom",
    "Hello", "world", "model",  "token", "cache", "prefix", "system", "user", "prompt", "answer",
};

class PieceList {
 public:
  PieceList(Vocab& vocab, int32_t limit) : vocab_(vocab), limit_(limit) {}
  bool full() const { return vocab_.size() >= limit_; }
  // Adds `piece` and, first, every prefix of it (prefixes are whole UTF-8 characters here
  // because pieces are ASCII apart from the leading space mark).
  void add_with_prefixes(std::string_view piece) {
    size_t start = piece.starts_with(kSpaceMark) ? kSpaceMark.size() : 1;
    for (size_t length = start; length <= piece.size() && !full(); ++length) {
      add(std::string(piece.substr(0, length)));
    }
  }
  void add(std::string piece) {
    if (full() || !seen_.insert(piece).second) return;
    vocab_.scores.push_back(-static_cast<float>(vocab_.tokens.size()));
    vocab_.types.push_back(TokenType::NORMAL);
    vocab_.tokens.push_back(std::move(piece));
  }

 private:
  Vocab& vocab_;
  int32_t limit_;
  std::unordered_set<std::string> seen_;
};

// Calls add(letters) for every run of 2, then 3, then 4 letters a..z in order, until the vocab is
// full.
template <class Add>
void for_letter_runs(const PieceList& pieces, Add add) {
  for (int length = 2; length <= 4 && !pieces.full(); ++length) {
    std::string letters(static_cast<size_t>(length), 'a');
    while (!pieces.full()) {
      add(letters);
      size_t i = letters.size();  // odometer increment over a..z
      while (i > 0 && letters[i - 1] == 'z') letters[--i] = 'a';
      if (i == 0) break;
      ++letters[i - 1];
    }
  }
}

void add_special(Vocab& vocab, const char* text, TokenType type) {
  vocab.tokens.emplace_back(text);
  vocab.scores.push_back(0.0f);
  vocab.types.push_back(type);
}

}  // namespace

Vocab make_synth_vocab(int32_t n_vocab) {
  assert(n_vocab >= 300);
  Vocab vocab;
  vocab.kind = TokenizerKind::SPM;
  vocab.model = "llama";
  vocab.pre = "default";
  vocab.unk_id = 0;
  vocab.bos_id = 1;
  vocab.eos_id = 2;
  vocab.add_bos = true;
  vocab.add_space_prefix = true;
  add_special(vocab, "<unk>", TokenType::UNKNOWN);
  add_special(vocab, "<s>", TokenType::CONTROL);
  add_special(vocab, "</s>", TokenType::CONTROL);
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", byte);
    add_special(vocab, name, TokenType::BYTE);
  }

  PieceList pieces(vocab, n_vocab);
  pieces.add(std::string(kSpaceMark));
  for (char c = 33; c < 127; ++c) pieces.add(std::string(1, c));  // printable ASCII
  for (std::string_view word : kCommonWords) {
    pieces.add_with_prefixes(std::string(kSpaceMark) + std::string(word));
    pieces.add_with_prefixes(word);
  }
  // Fill the rest with letter bigrams then trigrams, word-initial and word-internal.
  for_letter_runs(pieces, [&](const std::string& letters) {
    pieces.add_with_prefixes(std::string(kSpaceMark) + letters);
    pieces.add_with_prefixes(letters);
  });
  assert(vocab.size() == n_vocab);
  return vocab;
}

Vocab make_synth_wordpiece_vocab(int32_t n_vocab) {
  assert(n_vocab >= 300);
  Vocab vocab;
  vocab.kind = TokenizerKind::WORDPIECE;
  vocab.model = "bert";
  vocab.pre = "default";
  vocab.pad_id = 0;
  vocab.unk_id = 1;
  vocab.bos_id = 2;  // [CLS]
  vocab.eos_id = 3;  // [SEP]
  vocab.add_bos = true;
  vocab.add_eos = true;
  add_special(vocab, "[PAD]", TokenType::CONTROL);
  add_special(vocab, "[UNK]", TokenType::CONTROL);
  add_special(vocab, "[CLS]", TokenType::CONTROL);
  add_special(vocab, "[SEP]", TokenType::CONTROL);
  add_special(vocab, "[MASK]", TokenType::CONTROL);

  // Every printable ASCII character alone and as a word's continuation, so that any lowercase
  // ASCII word tokenizes; then whole common words, then letter bigrams and trigrams. As
  // llama.cpp's converter writes BERT vocabs, a piece that starts a word carries the space mark
  // and a continuation is bare (BERT's own files write "##" before continuations instead).
  PieceList pieces(vocab, n_vocab);
  for (char c = 33; c < 127; ++c) {
    if (c >= 'A' && c <= 'Z') continue;  // the basic tokenizer lowercases
    pieces.add(std::string(kSpaceMark) + c);
    pieces.add(std::string(1, c));
  }
  for (std::string_view word : kCommonWords) {
    std::string lower(word);
    for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    pieces.add(std::string(kSpaceMark) + lower);
  }
  for_letter_runs(pieces, [&](const std::string& letters) {
    pieces.add(std::string(kSpaceMark) + letters);
    pieces.add(letters);
  });
  assert(vocab.size() == n_vocab);
  return vocab;
}

}  // namespace trellis
