// The speculator's memory across sequences: a draft model that keeps missing is not tried with a
// full draft on every new sequence, while the cheap sources start hopeful each time.
#include "spec/speculator.h"

#include <gtest/gtest.h>

namespace trellis {
namespace {

constexpr auto kModel = static_cast<size_t>(DraftSource::DRAFT_MODEL);
constexpr auto kCache = static_cast<size_t>(DraftSource::PREFIX_CACHE);

TEST(SpeculatorTest, NewSequencesStartFromTheDraftModelsAcceptanceSoFar) {
  Speculator speculator{SpeculationConfig{}};
  EXPECT_EQ(speculator.new_state().lengths[kModel].next(1), 8);  // hopeful at first
  for (int i = 0; i < 20; ++i) {  // sequence after sequence, its guesses all wrong
    SpeculationState state = speculator.new_state();
    state.source = DraftSource::DRAFT_MODEL;
    speculator.verified(state, 4, 0);
  }
  SpeculationState fresh = speculator.new_state();
  EXPECT_EQ(fresh.lengths[kModel].next(1), 0);  // a probe later, not a full draft now
  EXPECT_EQ(fresh.lengths[kCache].next(1), 8);  // the other sources know nothing of it
  for (int i = 0; i < 30; ++i) {                // then it agrees again
    SpeculationState state = speculator.new_state();
    state.source = DraftSource::DRAFT_MODEL;
    speculator.verified(state, 4, 4);
  }
  EXPECT_GE(speculator.new_state().lengths[kModel].next(1), 4);
  EXPECT_EQ(speculator.counts()[kModel].n_drafts, 50);
}

}  // namespace
}  // namespace trellis
