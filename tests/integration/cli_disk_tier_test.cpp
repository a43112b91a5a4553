// `trellis generate --cache-dir`: a prefix cached by one process is found on disk by the next
// one (the same tokens as without any cache), a tier of another block size is ignored with one
// line, a directory in use is refused, and bad flags are clear errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_runner.h"
#include "test_support.h"

namespace trellis {
namespace {

using testing::CommandResult;
using testing::run_cli;

class CliDiskTierTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = testing::temp_dir() + "/cli-disk-tiny.gguf";
    CommandResult synth = run_cli("model synth --preset tiny --type q8_0 --seed 5 -o " + model_);
    ASSERT_EQ(synth.exit_code, 0) << synth.output;
  }
  static std::string generate(const std::string& flags) {
    return "generate -m " + model_ +
           " --temp 0 -n 5 --ctx 256 --json -p 'The quick brown fox jumps over the lazy dog and "
           "keeps running through the forest until night falls on the quiet hills.' " +
           flags;
  }
  // The one JSON line of a run (stderr dropped); fails the test when the run fails.
  static nlohmann::json run_json(const std::string& flags) {
    CommandResult r = run_cli(generate(flags), false);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.exit_code == 0 ? nlohmann::json::parse(r.output) : nlohmann::json::object();
  }
  static std::string model_;
};
std::string CliDiskTierTest::model_;

TEST_F(CliDiskTierTest, TheNextProcessFindsThePrefixOnDisk) {
  const std::string dir = testing::temp_dir() + "/cli-cache";
  std::filesystem::remove_all(dir);
  const nlohmann::json off = run_json("-B 8 --prefix-cache off");
  const nlohmann::json first = run_json("-B 8 --cache-dir " + dir);
  EXPECT_EQ(first["disk_cached_tokens"], 0);
  for (int restart = 0; restart < 2; ++restart) {
    const nlohmann::json again = run_json("-B 8 --cache-dir " + dir + " --cache-disk 64MiB");
    EXPECT_EQ(again["generated_tokens"], off["generated_tokens"]);
    EXPECT_GE(again["disk_cached_tokens"].get<int>(), 48);
    EXPECT_EQ(again["disk_cached_tokens"], again["cached_tokens"]);
  }
  // Another block size: another tier; the first is ignored, said once, and left in place.
  CommandResult other = run_cli(generate("-B 16 --cache-dir " + dir));
  EXPECT_EQ(other.exit_code, 0) << other.output;
  EXPECT_NE(other.output.find("ignoring 1 tier"), std::string::npos) << other.output;
  EXPECT_NE(other.output.find("\"disk_cached_tokens\":0"), std::string::npos) << other.output;
  EXPECT_GE(run_json("-B 8 --cache-dir " + dir)["disk_cached_tokens"].get<int>(), 48);
}

TEST_F(CliDiskTierTest, BadFlagsAndABusyDirectoryAreClearErrors) {
  const std::string dir = testing::temp_dir() + "/cli-cache-errors";
  CommandResult no_cache = run_cli(generate("--prefix-cache off --cache-dir " + dir));
  EXPECT_EQ(no_cache.exit_code, 1);
  EXPECT_NE(no_cache.output.find("needs --prefix-cache on"), std::string::npos) << no_cache.output;
  CommandResult bad_size = run_cli(generate("--cache-dir " + dir + " --cache-disk 12XB"));
  EXPECT_EQ(bad_size.exit_code, 1);
  EXPECT_NE(bad_size.output.find("--cache-disk"), std::string::npos) << bad_size.output;
  CommandResult tiny = run_cli(generate("--cache-dir " + dir + " --cache-disk 1KiB"));
  EXPECT_EQ(tiny.exit_code, 1);
  EXPECT_NE(tiny.output.find("smaller than one KV block"), std::string::npos) << tiny.output;
  // Another process holds the directory: flock(1) locks DIR/lock around the run.
  const std::string busy = testing::temp_dir() + "/cli-cache-busy";
  std::filesystem::create_directories(busy);
  CommandResult refused = testing::run_shell("flock " + busy + "/lock " + TRELLIS_CLI_PATH + " " +
                                             generate("--cache-dir " + busy) + " 2>&1");
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.output.find("in use by another process"), std::string::npos) << refused.output;
}

TEST_F(CliDiskTierTest, BenchRestartFindsTheSystemPromptOnDiskAfterARestart) {
  const std::string out = testing::temp_dir() + "/bench-restart";
  // The tier goes in a folder of its own inside --cache-dir: what else is there stays.
  const std::string dir = testing::temp_dir() + "/bench-restart-dir";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/keep-me") << "mine";
  CommandResult r =
      run_cli("bench restart -m " + model_ + " -B 8 -L 100 -n 3 --reps 2 --json --cache-dir " +
                  dir + " --out " + out,
              false);
  EXPECT_TRUE(std::filesystem::exists(dir + "/keep-me"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir),
                          std::filesystem::directory_iterator()),
            1)
      << "the bench's own folder is removed";
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json record = nlohmann::json::parse(r.output);
  const nlohmann::json& results = record["results"];
  EXPECT_EQ(results["outputs_match"], true);
  const nlohmann::json& phases = results["phases"];
  ASSERT_EQ(phases.size(), 3u);
  EXPECT_EQ(phases[0]["phase"], "cold");
  EXPECT_EQ(phases[0]["cached_tokens"], 0);
  EXPECT_EQ(phases[1]["cached_tokens"], 100);  // the system prompt, in memory
  EXPECT_EQ(phases[1]["disk_cached_tokens"], 0);
  EXPECT_EQ(phases[2]["disk_cached_tokens"], 100);  // 12 whole blocks and a partial one, from disk
  EXPECT_TRUE(std::filesystem::exists(out + "/results.json"));
}

}  // namespace
}  // namespace trellis
