// `trellis bench router` end to end on the tiny model: multi-turn sessions of several groups
// through the router under each policy and through one replica, results written, the routing
// visible in the usage the replicas reported. No timing assertions.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_runner.h"
#include "test_support.h"

namespace trellis {
namespace {

using testing::CommandResult;
using testing::run_cli;

TEST(BenchRouterTest, EveryPolicyRunsAndCacheAwareKeepsConversationsCached) {
  const std::string model = testing::temp_dir() + "/bench-router-tiny.gguf";
  ASSERT_EQ(run_cli("model synth --preset tiny --type q8_0 --seed 5 -o " + model).exit_code, 0);
  const std::string dir = testing::temp_dir() + "/bench-router";
  const std::string command = "bench router -m " + model +
                              " --groups 3 --sessions 2 --turns 3 --system-len 48 --user-len 8 "
                              "-D 4 --json --out " + dir;
  const CommandResult run = run_cli(command, /*with_stderr=*/false);
  ASSERT_EQ(run.exit_code, 0) << run_cli(command).output;
  const nlohmann::json record = nlohmann::json::parse(run.output);
  EXPECT_EQ(record["bench"], "router");
  EXPECT_EQ(record["threads_per_replica"], 1);
  ASSERT_EQ(record["runs"].size(), 4u);
  const char* names[] = {"cache-aware", "round-robin", "least-load", "single"};
  for (size_t i = 0; i < 4; ++i) {
    const nlohmann::json& r = record["runs"][i];
    EXPECT_EQ(r["run"], names[i]);
    EXPECT_EQ(r["requests"], 18);
    EXPECT_EQ(r["replicas"], i < 3 ? 2 : 1);
    uint64_t routed = 0;
    for (const nlohmann::json& n : r["requests_per_replica"]) routed += n.get<uint64_t>();
    EXPECT_EQ(routed, 18u) << r.dump();
    EXPECT_GT(r["prompt_tokens"].get<int64_t>(), 0);
    ASSERT_EQ(r["group_latency_ms_p99"].size(), 3u);
    double worst = 0;
    for (const nlohmann::json& p99 : r["group_latency_ms_p99"]) worst = std::max(worst, p99.get<double>());
    EXPECT_EQ(worst, r["worst_group_latency_ms_p99"].get<double>());
    EXPECT_LE(r["ttft_ms_p50"].get<double>(), r["latency_ms_p50"].get<double>() + 1e-9);
  }
  const nlohmann::json& cache_aware = record["runs"][0];
  const nlohmann::json& round_robin = record["runs"][1];
  // A conversation's later turns find its earlier ones where the router sent them; round robin
  // sends every other turn elsewhere.
  EXPECT_GT(cache_aware["cached_tokens"].get<int64_t>(), 0);
  EXPECT_GE(cache_aware["cached_tokens"].get<int64_t>(), round_robin["cached_tokens"].get<int64_t>());
  EXPECT_EQ(round_robin["requests_per_replica"], nlohmann::json::array({9, 9}));
  EXPECT_TRUE(std::filesystem::exists(dir + "/results.json"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/results.csv"));
}

}  // namespace
}  // namespace trellis
