// `trellis bench workload NAME` end to end on the tiny model: each of the four workloads run with
// the cache off, on + FCFS and on + LPM, with results.json / results.csv written, hit rates that
// show the cache at work, and identical outputs across the three runs. No timing assertions.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "test_support.h"

namespace trellis {
namespace {

using testing::CommandResult;
using testing::run_cli;
using testing::run_shell;

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

class BenchWorkloadTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = testing::temp_dir() + "/workload-tiny.gguf";
    CommandResult synth = run_cli("model synth --preset tiny --type q8_0 --seed 5 -o " + model_);
    ASSERT_EQ(synth.exit_code, 0) << synth.output;
  }

  // Runs `bench workload NAME ARGS --json` into its own results folder; checks what every
  // workload must give and returns the record. Small blocks and two running requests at a time,
  // so that later requests find what earlier ones cached.
  static nlohmann::json run_workload(const std::string& name, const std::string& args,
                                     int64_t expected_prompt_tokens, size_t n_runs = 3) {
    const std::string dir = testing::temp_dir() + "/results-" + name;
    CommandResult run = run_cli("bench workload " + name + " --json -t 1 -B 8 --max-seqs 2 " +
                                    args + " --out " + dir + " -m " + model_,
                                false);
    EXPECT_EQ(run.exit_code, 0) << run.output;
    nlohmann::json j = nlohmann::json::parse(run.output, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      ADD_FAILURE() << "not JSON: " << run.output;
      return j;
    }
    EXPECT_EQ(j["bench"], "workload");
    EXPECT_EQ(j["workload"], name);
    EXPECT_TRUE(j["outputs_identical"].get<bool>());
    EXPECT_TRUE(j.contains("machine"));
    EXPECT_TRUE(j.contains("model"));
    EXPECT_GT(j["D"].get<int>(), 0);
    const nlohmann::json& runs = j["runs"];
    EXPECT_EQ(runs.size(), n_runs);
    if (runs.size() != n_runs) return j;
    EXPECT_EQ(runs[0]["run"], "cache off");
    EXPECT_EQ(runs[1]["run"], "cache on, fcfs");
    EXPECT_EQ(runs[2]["run"], "cache on, lpm");
    EXPECT_EQ(runs[0]["cached_tokens"], 0);
    EXPECT_EQ(runs[0]["hit_rate"].get<double>(), 0.0);
    for (const nlohmann::json& r : runs) {
      SCOPED_TRACE(r["run"].get<std::string>());
      EXPECT_EQ(r["prompt_tokens"].get<int64_t>(), expected_prompt_tokens);
      EXPECT_LT(r["cached_tokens"].get<int64_t>(), r["prompt_tokens"].get<int64_t>());
      const double hit_rate = r["hit_rate"].get<double>();
      EXPECT_NEAR(hit_rate, r["cached_tokens"].get<double>() / r["prompt_tokens"].get<double>(),
                  1e-12);
      if (r["run"] != "cache off") {
        EXPECT_GT(hit_rate, 0.0);
      }
      EXPECT_GT(r["generation_tokens_per_s"].get<double>(), 0.0);
      EXPECT_GT(r["latency_ms_mean"].get<double>(), 0.0);
      EXPECT_GE(r["latency_ms_p99"].get<double>(), r["latency_ms_p50"].get<double>());
      EXPECT_GT(r["wall_ms"].get<double>(), 0.0);
      EXPECT_GE(r["scheduler_ms_per_step"].get<double>(), 0.0);
    }
    const std::vector<std::string> csv = read_lines(dir + "/results.csv");
    EXPECT_EQ(csv.size(), n_runs + 1) << "a header and one row per run";
    if (!csv.empty()) {
      EXPECT_EQ(csv[0].rfind("run,prompt_tokens,cached_tokens,hit_rate,generation_tokens_per_s", 0),
                0u)
          << csv[0];
    }
    std::ifstream json_file(dir + "/results.json");
    EXPECT_TRUE(json_file.good());
    return j;
  }

  static std::string model_;
};
std::string BenchWorkloadTest::model_;

TEST_F(BenchWorkloadTest, AgentsSharesEachGroupsPrefix) {
  // 2 groups x 3 requests of 32 + 8 tokens.
  nlohmann::json j = run_workload(
      "agents", "--groups 2 --per-group 3 --prefix-len 32 --suffix-len 8 -D 3", 6 * 40);
  EXPECT_EQ(j["groups"], 2);
  EXPECT_EQ(j["per_group"], 3);
}

TEST_F(BenchWorkloadTest, FewShotSharesTheExamples) {
  // 6 questions of 8 tokens after 3 shots x 16 tokens.
  nlohmann::json j = run_workload(
      "few-shot", "--shots 3 --shot-len 16 --questions 6 --suffix-len 8 -D 3", 6 * (48 + 8));
  EXPECT_EQ(j["shots"], 3);
  EXPECT_EQ(j["shot_len"], 16);
  EXPECT_EQ(j["questions"], 6);
  // Only the first requests admitted can miss the 48 shared tokens; LPM and FCFS both keep them.
  EXPECT_GT(j["runs"][2]["hit_rate"].get<double>(), 0.4);
}

TEST_F(BenchWorkloadTest, MultiTurnReusesEachSessionsHistory) {
  // 2 sessions x 3 turns: prompts of 24 + 8, then + 3 generated + 8 each turn: 32, 43, 54.
  nlohmann::json j =
      run_workload("multi-turn", "--sessions 2 --turns 3 --prefix-len 24 --suffix-len 8 -D 3",
                   2 * (32 + 43 + 54));
  EXPECT_EQ(j["sessions"], 2);
  EXPECT_EQ(j["turns"], 3);
  // Turns 2 and 3 find at least the previous turn's prompt (and its answer) cached.
  for (size_t i = 1; i < 3; ++i)
    EXPECT_GE(j["runs"][i]["cached_tokens"].get<int64_t>(), 2 * (32 + 43) - 2 * 8);
}

TEST_F(BenchWorkloadTest, WithACacheDirTwoMoreRunsHaveTheDiskTier) {
  // 4 sessions x 3 turns (histories of up to 57 tokens, 228 in all) over a pool of 128 tokens:
  // the histories evict each other between turns, and with --cache-dir two more runs (FCFS,
  // LPM) keep the evicted blocks on disk. Their outputs equal the other runs' (run_workload
  // checks). How many
  // tokens come back from disk depends on the order in which the sessions' turns arrive (LPM
  // runs first the sessions whose history is still in memory), so that number is only bounded
  // here; the engine's disk tier tests count disk hits exactly.
  const std::string dir = testing::temp_dir() + "/workload-tier";
  nlohmann::json j = run_workload("multi-turn",
                                  "--sessions 4 --turns 3 --prefix-len 24 --suffix-len 8 -D 3 "
                                  "--kv-tokens 128 --cache-dir " +
                                      dir,
                                  4 * (32 + 43 + 54), 5);
  if (j["runs"].size() != 5u) return;
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(j["runs"][i]["disk_cached_tokens"], 0);
  EXPECT_EQ(j["runs"][3]["run"], "cache on, fcfs, disk tier");
  EXPECT_EQ(j["runs"][4]["run"], "cache on, lpm, disk tier");
  for (size_t i = 3; i < 5; ++i) {
    const nlohmann::json& tier = j["runs"][i];
    EXPECT_LE(tier["disk_cached_tokens"].get<int64_t>(), tier["cached_tokens"].get<int64_t>());
  }
  EXPECT_TRUE(std::filesystem::is_directory(dir)) << "the tier lived inside --cache-dir";
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "and its folder is removed afterwards";
}

TEST_F(BenchWorkloadTest, TreeOfThoughtForksFinishedNodes) {
  // 2 trees of depth 2, branch 2: 7 nodes each; prompts 24 + 8 at the root, + 3 per level.
  nlohmann::json j = run_workload(
      "tree-of-thought",
      "--trees 2 --depth 2 --branch 2 --prefix-len 24 --suffix-len 8 -D 3 --temp 0.9 --seed 3",
      2 * (32 + 2 * 35 + 4 * 38));
  EXPECT_EQ(j["trees"], 2);
  EXPECT_EQ(j["depth"], 2);
  EXPECT_EQ(j["branch"], 2);
  EXPECT_TRUE(j.contains("note"));  // why the cache-off run does not fork
  // Every non-root node's history but its last token is shared with its parent.
  for (size_t i = 1; i < 3; ++i)
    EXPECT_GE(j["runs"][i]["cached_tokens"].get<int64_t>(), 2 * (2 * 34 + 4 * 37));
}

TEST_F(BenchWorkloadTest, ForkWorksWithTheCacheOff) {
  // The reason the tree-of-thought's cache-off run submits plain requests: fork shares the
  // prompt's blocks without the prefix cache too (counted as cached tokens), same samples.
  const std::string common = "generate --json -t 1 --temp 0.9 -s 7 -n 4 -B 4 --fork 3 -m " +
                             model_ + " -p 'one prompt, three samples'";
  CommandResult on = run_cli(common, false);
  CommandResult off = run_cli(common + " --prefix-cache off", false);
  ASSERT_EQ(on.exit_code, 0) << on.output;
  ASSERT_EQ(off.exit_code, 0) << off.output;
  std::istringstream on_lines(on.output), off_lines(off.output);
  std::string a, b;
  int n = 0;
  while (std::getline(on_lines, a) && std::getline(off_lines, b)) {
    nlohmann::json x = nlohmann::json::parse(a), y = nlohmann::json::parse(b);
    EXPECT_EQ(x["generated_tokens"], y["generated_tokens"]) << n;
    if (n > 0) {
      EXPECT_EQ(y["cached_tokens"], y["prompt_tokens"].size());
    }
    ++n;
  }
  EXPECT_EQ(n, 3);
}

TEST_F(BenchWorkloadTest, RepsAddSpreadColumns) {
  const std::string dir = testing::temp_dir() + "/results-reps";
  CommandResult run = run_cli(
      "bench workload few-shot --json -t 1 -B 8 --reps 2 --shots 2 --shot-len 8 --questions 2 "
      "--suffix-len 4 -D 2 --out " +
          dir + " -m " + model_,
      false);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  nlohmann::json j = nlohmann::json::parse(run.output);
  EXPECT_EQ(j["reps"], 2);
  for (const nlohmann::json& r : j["runs"]) {
    EXPECT_EQ(r["reps"], 2);
    EXPECT_GE(r["generation_tokens_per_s_stddev"].get<double>(), 0.0);
    EXPECT_EQ(r["prompt_tokens"], 2 * 20);
  }
  const std::vector<std::string> csv = read_lines(dir + "/results.csv");
  ASSERT_EQ(csv.size(), 4u);
  EXPECT_NE(csv[0].find(",reps,generation_tokens_per_s_stddev"), std::string::npos) << csv[0];
}

TEST_F(BenchWorkloadTest, UnknownNameAndBadSizesAreClearErrors) {
  CommandResult unknown = run_cli("bench workload nonsense -m " + model_);
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(
      unknown.output.find(
          "unknown workload 'nonsense' (available: agents, few-shot, multi-turn, tree-of-thought)"),
      std::string::npos)
      << unknown.output;
  CommandResult zero = run_cli("bench workload multi-turn --turns 0 -m " + model_);
  EXPECT_EQ(zero.exit_code, 1);
  EXPECT_NE(zero.output.find("--turns must be positive"), std::string::npos) << zero.output;
  CommandResult greedy_tree = run_cli("bench workload tree-of-thought --temp 0 -m " + model_);
  EXPECT_EQ(greedy_tree.exit_code, 1);
  EXPECT_NE(greedy_tree.output.find("--temp must be positive"), std::string::npos)
      << greedy_tree.output;
}

}  // namespace
}  // namespace trellis
