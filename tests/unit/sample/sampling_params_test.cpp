// SamplingParams::validate(): neutral defaults pass, each out-of-range field is named in the error.
#include "sample/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace trellis {
namespace {

TEST(SamplingParamsTest, DefaultsAreValidAndNeutral) {
  SamplingParams params;
  EXPECT_TRUE(params.validate().ok());
  EXPECT_FALSE(params.is_greedy());
  EXPECT_FALSE(params.has_penalties());
}

TEST(SamplingParamsTest, BoundaryValuesAreValid) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.top_k = 0;
  params.top_p = 1.0f;
  params.min_p = 1.0f;
  params.repetition_penalty = 0.01f;
  params.frequency_penalty = -2.0f;
  params.presence_penalty = 2.0f;
  params.penalty_last_n = -1;
  Status status = params.validate();
  EXPECT_TRUE(status.ok()) << status.error().message;
  EXPECT_TRUE(params.is_greedy());
  EXPECT_TRUE(params.has_penalties());
}

TEST(SamplingParamsTest, PenaltiesOffWhenWindowIsEmpty) {
  SamplingParams params;
  params.repetition_penalty = 1.3f;
  params.penalty_last_n = 0;
  EXPECT_FALSE(params.has_penalties());
}

struct BadCase {
  std::function<void(SamplingParams&)> change;
  std::string field;
};

TEST(SamplingParamsTest, OutOfRangeValuesNameTheField) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<BadCase> cases = {
      {[](SamplingParams& p) { p.temperature = -0.5f; }, "temperature"},
      {[&](SamplingParams& p) { p.temperature = nan; }, "temperature"},
      {[&](SamplingParams& p) { p.temperature = inf; }, "temperature"},
      {[](SamplingParams& p) { p.top_k = -1; }, "top_k"},
      {[](SamplingParams& p) { p.top_p = 0.0f; }, "top_p"},
      {[](SamplingParams& p) { p.top_p = 1.5f; }, "top_p"},
      {[&](SamplingParams& p) { p.top_p = nan; }, "top_p"},
      {[](SamplingParams& p) { p.min_p = -0.1f; }, "min_p"},
      {[](SamplingParams& p) { p.min_p = 1.01f; }, "min_p"},
      {[](SamplingParams& p) { p.repetition_penalty = 0.0f; }, "repetition_penalty"},
      {[&](SamplingParams& p) { p.repetition_penalty = inf; }, "repetition_penalty"},
      {[](SamplingParams& p) { p.frequency_penalty = 2.5f; }, "frequency_penalty"},
      {[&](SamplingParams& p) { p.frequency_penalty = nan; }, "frequency_penalty"},
      {[](SamplingParams& p) { p.presence_penalty = -3.0f; }, "presence_penalty"},
      {[](SamplingParams& p) { p.penalty_last_n = -2; }, "penalty_last_n"},
  };
  for (const BadCase& bad : cases) {
    SamplingParams params;
    bad.change(params);
    Status status = params.validate();
    ASSERT_FALSE(status.ok()) << bad.field;
    EXPECT_NE(status.error().message.find(bad.field), std::string::npos)
        << bad.field << ": " << status.error().message;
  }
}

TEST(SamplingParamsTest, MessageShowsTheValue) {
  SamplingParams params;
  params.top_p = 1.5f;
  Status status = params.validate();
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().message, "top_p must be in (0, 1] (1 = off), got 1.5");
}

}  // namespace
}  // namespace trellis
