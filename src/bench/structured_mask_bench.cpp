#include "bench/structured_mask_bench.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>

#include "bench/stats.h"
#include "gguf/gguf_file.h"
#include "grammar/token_grammar.h"
#include "grammar/token_trie.h"
#include "sample/rng.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace trellis::bench {

namespace structured_mask_detail {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// A vocabulary's token trie, built from the pieces the engine's GrammarRegistry uses.
struct LoadedVocab {
  std::shared_ptr<const TokenTrie> trie;
  VocabFacts facts;
};

Result<LoadedVocab> load_vocab_trie(const std::string& path) {
  Result<GgufFile> file = GgufFile::open(path);
  if (!file.ok()) return file.error();
  Result<Vocab> vocab = load_vocab(*file);
  if (!vocab.ok()) return Error{path + ": " + vocab.error().message};
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::create(std::move(*vocab));
  if (!tokenizer.ok()) return Error{path + ": " + tokenizer.error().message};
  const Tokenizer& t = **tokenizer;
  std::vector<std::string_view> pieces;
  pieces.reserve(static_cast<size_t>(t.vocab().size()));
  for (TokenId id = 0; id < t.vocab().size(); ++id) pieces.push_back(t.piece(id));
  const Clock::time_point start = Clock::now();
  auto trie = std::make_shared<const TokenTrie>(pieces);  // copies the pieces' bytes
  LoadedVocab out{trie, {path, t.vocab().size(), static_cast<int64_t>(trie->n_nodes()), 0}};
  out.facts.trie_build_ms = ms_since(start);
  return out;
}

// Step times, one entry per step.
struct StepTimes {
  std::vector<double> mask_ms;   // TokenGrammar::mask
  std::vector<double> apply_ms;  // a logits row copied and masked, as GrammarCursor::mask does
};

// What one simulated request leaves: its step times and how it ended.
struct RequestTrace {
  StepTimes times;
  bool final = false;
  bool stuck = false;
};

// Buffers a request reuses: the allowed ids, a logits row and its masked copy.
struct Scratch {
  std::vector<TokenId> allowed;
  std::vector<float> logits;  // [vocab], zeros: the values do not change the work
  std::vector<float> masked;
};

// The engine's work with a mask once it has it (GrammarCursor::mask, less its stop tokens).
double time_apply(const TokenMask& mask, Scratch& scratch) {
  const Clock::time_point start = Clock::now();
  scratch.masked.assign(scratch.logits.begin(), scratch.logits.end());
  apply_token_mask(scratch.masked, mask);
  return ms_since(start);
}

// The allowed token with the longest piece (ties: the lowest id), or a uniformly random allowed
// one; kNoToken when the mask allows none. `allowed` is scratch.
TokenId choose_token(const TokenMask& mask, const TokenTrie& trie, Rng& rng, double longest_share,
                     std::vector<TokenId>& allowed) {
  allowed.clear();
  for (size_t word = 0; word < mask.size(); ++word) {
    for (uint64_t bits = mask[word]; bits != 0; bits &= bits - 1) {
      allowed.push_back(
          static_cast<TokenId>(word * 64 + static_cast<size_t>(__builtin_ctzll(bits))));
    }
  }
  if (allowed.empty()) return kNoToken;
  if (rng.next_double() < longest_share) {
    TokenId best = allowed[0];
    for (TokenId id : allowed)
      if (trie.piece(id).size() > trie.piece(best).size()) best = id;
    return best;
  }
  return allowed[static_cast<size_t>(rng.next_u64() % allowed.size())];
}

RequestTrace simulate_request(TokenGrammar& grammar, uint64_t seed, const MaskBenchOptions& options,
                              Scratch& scratch) {
  RequestTrace trace;
  Rng rng(seed);
  TokenGrammar::StateId state = grammar.initial();
  for (int32_t step = 0; step < options.max_tokens; ++step) {
    const Clock::time_point start = Clock::now();
    const TokenMask& mask = grammar.mask(state);
    trace.times.mask_ms.push_back(ms_since(start));
    trace.times.apply_ms.push_back(time_apply(mask, scratch));
    const TokenId token =
        choose_token(mask, grammar.trie(), rng, options.longest_share, scratch.allowed);
    const TokenGrammar::StateId next = token == kNoToken ? -1 : grammar.advance(state, token);
    if (next < 0) {
      trace.stuck = true;
      return trace;
    }
    state = next;
    if (grammar.is_final(state)) {
      trace.final = true;
      return trace;
    }
  }
  return trace;
}

// Adds one request's trace to `times` (the pooled step times go to `pool`).
void add_trace(const RequestTrace& trace, MaskTimes& times, StepTimes& pool) {
  ++times.n_requests;
  times.n_final += trace.final ? 1 : 0;
  times.n_stuck += trace.stuck ? 1 : 0;
  pool.mask_ms.insert(pool.mask_ms.end(), trace.times.mask_ms.begin(), trace.times.mask_ms.end());
  pool.apply_ms.insert(pool.apply_ms.end(), trace.times.apply_ms.begin(),
                       trace.times.apply_ms.end());
}

void summarize(const StepTimes& steps, const TokenGrammarStats& before,
               const TokenGrammarStats& after, MaskTimes& times) {
  const std::vector<double>& pool = steps.mask_ms;
  times.apply_mean_ms = stats(steps.apply_ms).mean;
  times.n_steps = static_cast<int64_t>(pool.size());
  times.n_computed = after.n_masks_computed - before.n_masks_computed;
  times.n_hits = after.n_mask_hits - before.n_mask_hits;
  times.mean_ms = stats(pool).mean;
  times.p50_ms = percentile(pool, 0.5);
  times.p99_ms = percentile(pool, 0.99);
  times.max_ms = pool.empty() ? 0.0 : *std::max_element(pool.begin(), pool.end());
}

// The requests of one (vocab, schema): the first cold, the rest warm, on one TokenGrammar.
MaskRow run_schema(const LoadedVocab& vocab, const NamedSchema& schema,
                   std::shared_ptr<const Grammar> grammar, const MaskBenchOptions& options,
                   const Observer& observer, const std::string& stage, uint64_t& done,
                   uint64_t total) {
  TokenGrammar tokens(std::move(grammar), vocab.trie);
  MaskRow row;
  row.vocab = std::filesystem::path(vocab.facts.path).filename().string();
  row.schema = schema.name;
  Scratch scratch;
  scratch.logits.assign(static_cast<size_t>(vocab.trie->vocab_size()), 0.0f);
  StepTimes cold_pool, warm_pool;
  TokenGrammarStats before = tokens.stats();
  for (int32_t i = 0; i < options.n_requests; ++i) {
    if (i == 1) {
      summarize(cold_pool, before, tokens.stats(), row.cold);
      before = tokens.stats();
    }
    const RequestTrace trace = simulate_request(
        tokens, derive_seed(options.seed, static_cast<uint64_t>(i)), options, scratch);
    add_trace(trace, i == 0 ? row.cold : row.warm, i == 0 ? cold_pool : warm_pool);
    observer.report_progress(stage, ++done, total);
  }
  if (options.n_requests == 1) {
    summarize(cold_pool, before, tokens.stats(), row.cold);
  } else {
    summarize(warm_pool, before, tokens.stats(), row.warm);
  }
  row.n_states = tokens.automaton().n_states();
  return row;
}

}  // namespace
}  // namespace structured_mask_detail

bool meets_mask_targets(const MaskTimes& t) {
  return t.mean_ms <= kMaskMeanTargetMs && t.p99_ms <= kMaskP99TargetMs;
}

Result<MaskBenchResult> run_mask_bench(const MaskBenchOptions& options,
                                       const std::vector<NamedSchema>& schemas,
                                       const Observer& observer) {
  namespace d = structured_mask_detail;
  if (options.n_requests < 1) return Error{"mask requests must be at least 1"};
  if (options.max_tokens < 1) return Error{"mask steps per request must be at least 1"};
  // Compiled once: every vocabulary gets the same grammars.
  std::vector<std::shared_ptr<const Grammar>> grammars;
  for (const NamedSchema& schema : schemas) {
    Result<Grammar> grammar = compile_json_schema(schema.schema);
    if (!grammar.ok()) return Error{"schema " + schema.name + ": " + grammar.error().message};
    grammars.push_back(std::make_shared<const Grammar>(std::move(grammar).value()));
  }
  MaskBenchResult result;
  for (const std::string& path : options.vocab_paths) {
    Result<d::LoadedVocab> vocab = d::load_vocab_trie(path);
    if (!vocab.ok()) return vocab.error();
    result.vocabs.push_back(vocab->facts);
    const std::string stage = "masks " + std::filesystem::path(path).filename().string();
    const uint64_t total = schemas.size() * static_cast<uint64_t>(options.n_requests);
    uint64_t done = 0;
    observer.report_progress(stage, 0, total);
    for (size_t s = 0; s < schemas.size(); ++s) {
      result.rows.push_back(
          d::run_schema(*vocab, schemas[s], grammars[s], options, observer, stage, done, total));
    }
  }
  return result;
}

}  // namespace trellis::bench
