#include "server/labelled_metrics.h"

#include <gtest/gtest.h>

namespace trellis {
namespace {

TEST(LabelledMetrics, EachFamilyOnceWithEverySourcesSamplesLabelled) {
  const std::string generation =
      "# HELP trellis:requests_total Requests\n"
      "# TYPE trellis:requests_total counter\n"
      "trellis:requests_total{status=\"200\"} 4\n"
      "# HELP trellis:latency_seconds Latency\n"
      "# TYPE trellis:latency_seconds histogram\n"
      "trellis:latency_seconds_bucket{le=\"1\"} 2\n"
      "trellis:latency_seconds_bucket{le=\"+Inf\"} 3\n"
      "trellis:latency_seconds_sum 2.5\n"
      "trellis:latency_seconds_count 3\n";
  const std::string other =
      "# HELP trellis:requests_total Requests\n"
      "# TYPE trellis:requests_total counter\n"
      "trellis:requests_total{} 1\n"
      "# HELP trellis:inputs_total Inputs\n"
      "# TYPE trellis:inputs_total counter\n"
      "trellis:inputs_total 9\n";
  EXPECT_EQ(merge_labelled_metrics("model", {{"q\"3", generation}, {"bge", other}}),
            "# HELP trellis:requests_total Requests\n"
            "# TYPE trellis:requests_total counter\n"
            "trellis:requests_total{model=\"q\\\"3\",status=\"200\"} 4\n"
            "trellis:requests_total{model=\"bge\"} 1\n"
            "# HELP trellis:latency_seconds Latency\n"
            "# TYPE trellis:latency_seconds histogram\n"
            "trellis:latency_seconds_bucket{model=\"q\\\"3\",le=\"1\"} 2\n"
            "trellis:latency_seconds_bucket{model=\"q\\\"3\",le=\"+Inf\"} 3\n"
            "trellis:latency_seconds_sum{model=\"q\\\"3\"} 2.5\n"
            "trellis:latency_seconds_count{model=\"q\\\"3\"} 3\n"
            "# HELP trellis:inputs_total Inputs\n"
            "# TYPE trellis:inputs_total counter\n"
            "trellis:inputs_total{model=\"bge\"} 9\n");
}

TEST(LabelledMetrics, NoSourcesNoText) {
  EXPECT_EQ(merge_labelled_metrics("model", {}), "");
}

}  // namespace
}  // namespace trellis
