#include "spec/speculator.h"

#include <algorithm>
#include <string>

namespace trellis {
namespace {

constexpr std::array<DraftSource, kDraftSources> kSources{
    DraftSource::PREFIX_CACHE, DraftSource::PROMPT_LOOKUP, DraftSource::NGRAM_POOL,
    DraftSource::DRAFT_MODEL};

// Weight of the draft model's history against its newest verification, across sequences.
constexpr double kPriorDecay = 0.9;

}  // namespace

std::string_view draft_source_name(DraftSource source) {
  switch (source) {
    case DraftSource::PREFIX_CACHE:
      return "prefix_cache";
    case DraftSource::PROMPT_LOOKUP:
      return "prompt_lookup";
    case DraftSource::NGRAM_POOL:
      return "ngram_pool";
    case DraftSource::DRAFT_MODEL:
      return "draft_model";
  }
  return "?";
}

Result<SpeculationConfig> parse_speculation(std::string_view text) {
  SpeculationConfig config;
  if (text == "on") return config;
  config.sources.fill(false);
  if (text == "off") return config;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view name = text.substr(0, comma);
    const auto it = std::find_if(kSources.begin(), kSources.end(),
                                 [&](DraftSource s) { return draft_source_name(s) == name; });
    if (it == kSources.end()) {
      return Error{"unknown speculation source '" + std::string(name) +
                   "' (expected on, off, or a list of prefix_cache, prompt_lookup, ngram_pool, "
                   "draft_model)"};
    }
    config.sources[static_cast<size_t>(*it)] = true;
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  return config;
}

void Speculator::propose(const RadixTree& tree, std::string_view ns,
                         std::span<const TokenId> tokens, int32_t n_decoding,
                         SpeculationState& state, std::vector<TokenId>& draft) {
  draft.clear();
  for (DraftSource source : kSources) {
    if (!config_.uses(source)) continue;
    const int32_t length = state.lengths[static_cast<size_t>(source)].next(n_decoding, cost_);
    if (length <= 0) continue;
    switch (source) {
      case DraftSource::PREFIX_CACHE:
        tree.continuation(ns, tokens, length, draft);
        break;
      case DraftSource::PROMPT_LOOKUP: {
        PromptLookupConfig lookup = config_.lookup;
        lookup.max_tokens = length;
        prompt_lookup_draft(tokens, lookup, draft);
        break;
      }
      case DraftSource::NGRAM_POOL:
        pool_.draft(tokens, length, draft);
        break;
      case DraftSource::DRAFT_MODEL:
        draft.assign(static_cast<size_t>(length), tokens.back());
        break;
    }
    if (!draft.empty()) {
      state.source = source;
      return;
    }
  }
}

SpeculationState Speculator::new_state() const {
  SpeculationState state(config_.length);
  state.lengths[static_cast<size_t>(DraftSource::DRAFT_MODEL)] =
      DraftLength(config_.length, draft_model_acceptance_);
  return state;
}

void Speculator::verified(SpeculationState& state, int32_t drafted, int32_t accepted) {
  const auto source = static_cast<size_t>(state.source);
  state.lengths[source].record(drafted, accepted);
  if (state.source == DraftSource::DRAFT_MODEL && drafted > 0) {
    const double rate = static_cast<double>(accepted) / drafted;
    draft_model_acceptance_ = kPriorDecay * draft_model_acceptance_ + (1 - kPriorDecay) * rate;
  }
  DraftCounts& counts = counts_[source];
  ++counts.n_drafts;
  counts.n_drafted += drafted;
  counts.n_accepted += accepted;
}

void Speculator::learn(std::span<const TokenId> tokens) {
  if (config_.uses(DraftSource::NGRAM_POOL)) pool_.add(tokens);
}

}  // namespace trellis
