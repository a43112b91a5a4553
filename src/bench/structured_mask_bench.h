// `trellis bench structured`, part 1: the token mask a constrained request needs at every decode
// step, timed on real vocabularies.
//
// Per (vocabulary, schema): one TokenGrammar (the schema's grammar over the vocabulary's trie), as
// the engine keeps one per grammar for every request that shares it. n_requests simulated requests
// decode against it one after another: from the initial state, each step asks mask(state) (timed:
// a trie walk, or a lookup when the state's mask is cached), picks an allowed token with the
// request's seeded generator (the longest allowed piece with probability longest_share, else a
// uniformly random allowed one) and advances, until the state is final or max_tokens steps (the
// engine's further work per step, masking a logits row, is timed apart). The first request meets
// an empty mask cache (cold); the others find what earlier ones cached (warm), which is how a
// server's requests with the same schema run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "bench/observer.h"
#include "bench/structured_schemas.h"

namespace trellis::bench {

// The targets the figures are held to (mean and 99th percentile of a mask per step).
inline constexpr double kMaskMeanTargetMs = 0.5;
inline constexpr double kMaskP99TargetMs = 5.0;

struct MaskBenchOptions {
  std::vector<std::string> vocab_paths;  // GGUF files with tokenizer.* metadata
  int32_t n_requests = 8;                // per (vocab, schema): 1 cold, then n_requests - 1 warm
  int32_t max_tokens = 300;              // steps per request at most
  uint64_t seed = 1;                     // request i uses derive_seed(seed, i)
  double longest_share = 0.5;            // the share of steps that take the longest allowed piece
};

// The mask times of some requests' steps, pooled.
struct MaskTimes {
  int32_t n_requests = 0;
  int32_t n_final = 0;     // requests that reached a final state (the others hit max_tokens)
  int32_t n_stuck = 0;     // requests that found no allowed token before a final state
  int64_t n_steps = 0;     // masks asked for: one per step
  int64_t n_computed = 0;  // of those, trie walks
  int64_t n_hits = 0;      // of those, served from the cache (n_computed + n_hits == n_steps)
  double mean_ms = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;
  // Mean time to copy a logits row and apply the mask to it (GrammarCursor::mask's work per
  // request and step beyond TokenGrammar::mask), not part of the figures above.
  double apply_mean_ms = 0;
};

// Whether `t` meets kMaskMeanTargetMs and kMaskP99TargetMs.
bool meets_mask_targets(const MaskTimes& t);

struct MaskRow {
  std::string vocab;     // the file's name
  std::string schema;    // NamedSchema::name
  MaskTimes cold;        // the first request
  MaskTimes warm;        // the others
  int32_t n_states = 0;  // automaton states the grammar had at the end
};

struct VocabFacts {
  std::string path;
  int32_t n_tokens = 0;
  int64_t n_trie_nodes = 0;
  double trie_build_ms = 0;  // building the token trie (once per vocabulary, in the engine too)
};

struct MaskBenchResult {
  std::vector<VocabFacts> vocabs;
  std::vector<MaskRow> rows;  // vocab-major, schemas in the order given
};

// Errors: a count out of range, an unreadable vocabulary, a schema that does not compile.
// Progress: stage "masks VOCAB", one unit per request of every schema.
Result<MaskBenchResult> run_mask_bench(const MaskBenchOptions& options,
                                       const std::vector<NamedSchema>& schemas,
                                       const Observer& observer);

}  // namespace trellis::bench
