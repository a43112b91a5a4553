// `trellis bench spec` on the tiny test model: every row is there, the regenerated answers are
// drafted whole from the prefix cache, the agent's from the n-gram pool, and bad options are
// refused. Speeds are only checked to be measured, never against a value.
#include "bench/spec_bench.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace trellis::bench {
namespace {

SpecBenchOptions tiny_options() {
  SpecBenchOptions options;
  options.model_path = testing::tiny_engine_model();
  options.engine.n_threads = 2;
  options.engine.block_size = 8;
  options.engine.speculation.length.weigh_step_cost = false;  // draft counts below, not timings
  options.n_prompt = 24;
  options.n_gen = 33;
  options.reps = 2;
  options.batch_sizes = {1, 3};
  return options;
}

TEST(SpecBenchTest, EachWorkloadDraftsFromItsSource) {
  Result<std::vector<SpecRow>> rows = run_spec_bench(tiny_options(), Observer{});
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  ASSERT_EQ(rows->size(), 8u);
  for (const SpecRow& r : *rows) {
    const std::string what = r.workload + " B=" + std::to_string(r.batch);
    EXPECT_GT(r.off_tokens_per_s.mean, 0) << what;
    EXPECT_GT(r.on_tokens_per_s.mean, 0) << what;
    EXPECT_GT(r.speedup.mean, 0) << what;
    EXPECT_EQ(r.n_generated, int64_t{2} * r.batch * 33) << what;  // reps x batch x n_gen
    EXPECT_LE(r.n_accepted, r.n_drafted) << what;
    if (r.workload == "regenerate") {
      // The whole answer is in the tree: every draft is kept, and all but the tokens verified
      // as each step's own were drafted (8 at most per step: 32 decode tokens in 4 steps).
      EXPECT_EQ(r.n_accepted, r.n_drafted) << what;
      EXPECT_GE(r.n_accepted, int64_t{2} * r.batch * 28) << what;
    }
    if (r.workload == "agent") {
      EXPECT_GT(r.n_accepted, 0) << what;
    }
  }
}

TEST(SpecBenchTest, BadOptionsAreRefused) {
  SpecBenchOptions options = tiny_options();
  options.workloads = {"regenerate", "lookahead"};
  Result<std::vector<SpecRow>> unknown = run_spec_bench(options, Observer{});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("'lookahead'"), std::string::npos);
  options = tiny_options();
  options.batch_sizes = {0};
  EXPECT_FALSE(run_spec_bench(options, Observer{}).ok());
  options = tiny_options();
  options.n_gen = 1;
  EXPECT_FALSE(run_spec_bench(options, Observer{}).ok());
}

}  // namespace
}  // namespace trellis::bench
