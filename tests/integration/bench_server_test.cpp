// `trellis bench server` end to end on the tiny model: concurrent streaming chat clients over
// loopback with the cache off and on, results written, the cache's effect visible in the usage
// the server reported, identical texts. No timing assertions.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_runner.h"
#include "test_support.h"

namespace trellis {
namespace {

using testing::CommandResult;
using testing::run_cli;

TEST(BenchServerTest, SharedSystemPromptIsCachedAndOutputsAgree) {
  const std::string model = testing::temp_dir() + "/bench-server-tiny.gguf";
  ASSERT_EQ(run_cli("model synth --preset tiny --type q8_0 --seed 5 -o " + model).exit_code, 0);
  const std::string dir = testing::temp_dir() + "/bench-server";
  const CommandResult run = run_cli("bench server -m " + model +
                                        " -t 1 --clients 3 --requests 2 --system-len 64 "
                                        "--user-len 8 -D 4 --json --out " +
                                        dir,
                                    /*with_stderr=*/false);
  ASSERT_EQ(run.exit_code, 0) << run_cli("bench server -m " + model + " --clients 1").output;
  const nlohmann::json record = nlohmann::json::parse(run.output);
  EXPECT_EQ(record["bench"], "server");
  EXPECT_TRUE(record["outputs_identical"].get<bool>());
  ASSERT_EQ(record["runs"].size(), 2u);
  const nlohmann::json& off = record["runs"][0];
  const nlohmann::json& on = record["runs"][1];
  EXPECT_EQ(off["run"], "cache off");
  EXPECT_EQ(on["run"], "cache on");
  for (const nlohmann::json* r : {&off, &on}) {
    EXPECT_EQ((*r)["requests"], 6);
    EXPECT_GT((*r)["requests_per_s"].get<double>(), 0);
    EXPECT_GT((*r)["ttft_ms_p50"].get<double>(), 0);
    EXPECT_LE((*r)["ttft_ms_p50"].get<double>(), (*r)["ttft_ms_p99"].get<double>());
    EXPECT_LE((*r)["ttft_ms_p99"].get<double>(), (*r)["latency_ms_p99"].get<double>());
  }
  EXPECT_EQ(off["cached_tokens"], 0);
  EXPECT_EQ(on["prompt_tokens"], off["prompt_tokens"]);
  EXPECT_GT(on["cached_tokens"].get<int64_t>(), 0) << "the system prompt is shared";
  EXPECT_LT(on["cached_tokens"].get<int64_t>(), on["prompt_tokens"].get<int64_t>());
  EXPECT_TRUE(std::filesystem::exists(dir + "/results.json"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/results.csv"));
}

}  // namespace
}  // namespace trellis
