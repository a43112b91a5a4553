// Speculative decoding's choice of drafts: for each decoding sequence, before a step, the tokens
// worth verifying after its last one, from the first source that has any:
//
//   PREFIX_CACHE   what the radix tree holds after the sequence's tokens (an earlier request went
//                  on from the same context: a regenerated answer, a repeated tool call)
//   PROMPT_LOOKUP  what followed the latest earlier occurrence of its last few tokens in its own
//                  prompt and output (code edits, summaries and grounded answers copy spans)
//   NGRAM_POOL     what followed its last few tokens in earlier requests (a bounded pool)
//   DRAFT_MODEL    a smaller model's greedy guesses (spec/draft_model.h): the speculator only
//                  decides their number, the engine runs the draft model once the step is planned
//
// Each source keeps its own acceptance history per sequence (spec/draft_length.h), so a source
// that keeps missing on a sequence goes quiet there while the others go on. The drafts are only
// guesses: the engine verifies them against the model's own choices and keeps exactly the tokens
// decoding without speculation would have produced.
//
// Not thread-safe: one owner (the engine loop). Proposing allocates nothing once the draft buffer
// has its capacity (the n-gram pool allocates as it learns, at the end of a request).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/token_id.h"
#include "prefix/radix_tree.h"
#include "spec/draft_length.h"
#include "spec/ngram_pool.h"
#include "spec/prompt_lookup.h"
#include "spec/step_cost.h"

namespace trellis {

enum class DraftSource : uint8_t { PREFIX_CACHE, PROMPT_LOOKUP, NGRAM_POOL, DRAFT_MODEL };
inline constexpr size_t kDraftSources = 4;
// "prefix_cache", "prompt_lookup", "ngram_pool", "draft_model": the names of flags and metrics.
std::string_view draft_source_name(DraftSource source);

struct SpeculationConfig {
  // By DraftSource. The draft model is used only where one is loaded (EngineConfig::draft_model).
  std::array<bool, kDraftSources> sources{true, true, true, true};
  DraftLengthConfig length;
  PromptLookupConfig lookup;
  NgramPoolConfig pool;

  bool enabled() const {
    return std::any_of(sources.begin(), sources.end(), [](bool on) { return on; });
  }
  bool uses(DraftSource s) const { return sources[static_cast<size_t>(s)]; }
};

// "on" (every source), "off" (none), or a comma-separated list of source names.
Result<SpeculationConfig> parse_speculation(std::string_view text);

// Tokens proposed and kept, per source.
struct DraftCounts {
  int64_t n_drafts = 0;  // verifications
  int64_t n_drafted = 0;
  int64_t n_accepted = 0;
};

// One sequence's speculation: each source's acceptance history, and the source of the draft
// being verified.
struct SpeculationState {
  std::array<DraftLength, kDraftSources> lengths;
  DraftSource source = DraftSource::PREFIX_CACHE;

  explicit SpeculationState(const DraftLengthConfig& config = {})
      : lengths{DraftLength(config), DraftLength(config), DraftLength(config),
                DraftLength(config)} {}
};

class Speculator {
 public:
  explicit Speculator(SpeculationConfig config) : config_(config), pool_(config.pool) {}

  const SpeculationConfig& config() const { return config_; }
  // A new sequence's state: hopeful for every source but the draft model, which starts from its
  // acceptance on the sequences before (a draft model that disagrees with the model keeps doing
  // so, and each of its guesses costs a pass).
  SpeculationState new_state() const;

  // The draft after `tokens` (a sequence of namespace `ns`, one of `n_decoding` sequences that
  // decode in the next step), into `draft` (its capacity reused; empty: none). From the draft
  // model, `draft` holds as many placeholders as it is to guess (the last token repeated).
  void propose(const RadixTree& tree, std::string_view ns, std::span<const TokenId> tokens,
               int32_t n_decoding, SpeculationState& state, std::vector<TokenId>& draft);
  // The verification of the last draft: `drafted` tokens proposed, the first `accepted` kept.
  void verified(SpeculationState& state, int32_t drafted, int32_t accepted);
  // A finished sequence's tokens, for the n-gram pool.
  void learn(std::span<const TokenId> tokens);
  // A decode step of `rows` rows (drafts included) took `ms`: what rows cost (spec/step_cost.h).
  void step_took(int32_t rows, double ms) { cost_.record(rows, ms); }
  const StepCost& step_cost() const { return cost_; }

  const std::array<DraftCounts, kDraftSources>& counts() const { return counts_; }

 private:
  SpeculationConfig config_;
  NgramPool pool_;
  double draft_model_acceptance_ = 1.0;  // over recent verifications, all sequences
  StepCost cost_;
  std::array<DraftCounts, kDraftSources> counts_{};
};

}  // namespace trellis
