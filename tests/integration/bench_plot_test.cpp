// The benches' results folders end to end on the tiny model: results.json/results.csv, the
// gnuplot script and its PNG (the PNG checks skip when gnuplot is not installed), and the
// figures of `bench block-size` that do not depend on timing. No timing assertions.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "cli_runner.h"
#include "test_support.h"

namespace trellis {
namespace {

using testing::CommandResult;
using testing::run_cli;
using testing::run_shell;

namespace fs = std::filesystem;

bool have_gnuplot() {
  return std::system("command -v gnuplot >/dev/null 2>&1") == 0;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class BenchPlotTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = testing::temp_dir() + "/bench-plot-tiny.gguf";
    CommandResult synth = run_cli("model synth --preset tiny --type q8_0 --seed 5 -o " + model_);
    ASSERT_EQ(synth.exit_code, 0) << synth.output;
  }

  // The folder's script and data exist; its PNG exists and is a PNG unless gnuplot is missing.
  static void expect_plot(const std::string& dir, const std::string& name,
                          const CommandResult& run) {
    EXPECT_TRUE(fs::exists(dir + "/results.json")) << run.output;
    EXPECT_TRUE(fs::exists(dir + "/results.csv")) << run.output;
    EXPECT_TRUE(fs::exists(dir + "/plot.gp")) << run.output;
    EXPECT_TRUE(fs::exists(dir + "/" + name + ".dat")) << run.output;
    if (!have_gnuplot()) {
      EXPECT_NE(run.output.find("gnuplot not found: plots skipped; install gnuplot-nox"),
                std::string::npos)
          << run.output;
      GTEST_SKIP() << "gnuplot is not installed: PNG check skipped (install gnuplot-nox)";
    }
    const std::string png = read_all(dir + "/" + name + ".png");
    ASSERT_GE(png.size(), 8u) << run.output;
    EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
    EXPECT_NE(run.output.find("plot written to " + dir + "/" + name + ".png"), std::string::npos)
        << run.output;
  }

  static std::string model_;
};
std::string BenchPlotTest::model_;

TEST_F(BenchPlotTest, PhiWritesPlot) {
  // A space and a quote in the folder name: the gnuplot command line must quote it.
  const std::string dir = testing::temp_dir() + "/phi out's";
  const CommandResult run =
      run_cli("bench phi -m " + model_ +
              " -L 32 -D 4 -N 2 --block-size 8 --phi 0,0.5 --reps 2 --out \"" + dir + "\"");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  expect_plot(dir, "phi", run);
}

TEST_F(BenchPlotTest, TtftWritesPlot) {
  const std::string dir = testing::temp_dir() + "/ttft";
  const CommandResult run = run_cli("bench ttft -m " + model_ +
                                    " -L 32 --block-size 8 --phi 0,0.5,max --reps 2 --out " + dir);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  nlohmann::json record = nlohmann::json::parse(read_all(dir + "/results.json"));
  ASSERT_EQ(record["points"].size(), 3u);
  for (const nlohmann::json& p : record["points"]) {
    EXPECT_TRUE(p["cache_on"].contains("ttft_ms"));
    EXPECT_TRUE(p["cache_off"].contains("ttft_ms"));
  }
  expect_plot(dir, "ttft", run);
}

TEST_F(BenchPlotTest, WithoutGnuplotTheBenchWarnsAndSucceeds) {
  const std::string dir = testing::temp_dir() + "/no-gnuplot";
  // No PATH entry holds gnuplot (the binary itself is started by its absolute path).
  const CommandResult run =
      run_cli("bench ttft -m " + model_ + " -L 32 --block-size 8 --phi 0,max --reps 1 --out " + dir,
              /*with_stderr=*/true, "PATH=/nonexistent ");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("gnuplot not found: plots skipped; install gnuplot-nox"),
            std::string::npos)
      << run.output;
  EXPECT_TRUE(fs::exists(dir + "/results.json"));
  EXPECT_TRUE(fs::exists(dir + "/plot.gp"));
  EXPECT_FALSE(fs::exists(dir + "/ttft.png"));
}

TEST_F(BenchPlotTest, BlockSizeRecordsLeavesHitsAndPlot) {
  const std::string dir = testing::temp_dir() + "/block-size";
  const CommandResult run = run_cli("bench block-size -m " + model_ +
                                    " --block-sizes 8,16 --lengths 40,72 --prompts 4 -N 3 "
                                    "--reps 1 --out " +
                                    dir);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("| B | mode | leaves |"), std::string::npos) << run.output;

  nlohmann::json record = nlohmann::json::parse(read_all(dir + "/results.json"));
  EXPECT_EQ(record["bench"], "block-size");
  for (const char* key : {"machine", "commit", "model", "lengths", "block_sizes", "summary"})
    EXPECT_TRUE(record.contains(key)) << key;
  EXPECT_EQ(record["model"]["sha256"].get<std::string>().size(), 64u);
  // Every (B, mode, L): 2 sizes x 3 modes (token, block, off) x 2 lengths.
  ASSERT_EQ(record["points"].size(), 12u);
  std::map<std::pair<int, int>, double> token_cached, block_cached;
  int n_on = 0;
  for (const nlohmann::json& p : record["points"]) {
    const std::string mode = p["mode"];
    const int B = p["B"], L = p["L"];
    const double cached = p["cached_tokens"];
    EXPECT_GE(p["ttft_ms"].get<double>(), 0.0);
    if (mode == "off") {
      EXPECT_EQ(cached, 0.0);
      continue;
    }
    ++n_on;
    EXPECT_GE(p["leaves"].get<double>(), 1.0) << p.dump();
    EXPECT_LE(p["leaves"].get<double>(), 4.0) << p.dump();  // at most one per warm prompt
    EXPECT_GT(p["ttft_ms"].get<double>(), 0.0) << p.dump();
    EXPECT_LE(cached, p["shared_tokens"].get<double>()) << p.dump();
    (mode == "token" ? token_cached : block_cached)[{B, L}] = cached;
  }
  EXPECT_EQ(n_on, 8);
  ASSERT_EQ(token_cached.size(), 4u);
  for (const auto& [key, cached] : token_cached) {
    ASSERT_TRUE(block_cached.count(key));
    EXPECT_GE(cached, block_cached[key]) << "B " << key.first << " L " << key.second;
    EXPECT_GT(cached, 0.0);
  }
  ASSERT_EQ(record["summary"].size(), 6u);
  for (const nlohmann::json& s : record["summary"]) {
    for (const char* key : {"leaves_mean", "cached_tokens_mean", "ttft_ms_mean", "ttft_ms_stddev"})
      EXPECT_TRUE(s.contains(key)) << key;
  }
  EXPECT_NE(read_all(dir + "/results.csv").find("B,mode,L,leaves"), std::string::npos);
  expect_plot(dir, "block-size", run);
}

}  // namespace
}  // namespace trellis
