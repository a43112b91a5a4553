// The `trellis` binary end to end: exit codes, output formats, and clear errors on bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_support.h"

namespace trellis {
namespace {

struct CommandResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

CommandResult run_cli(const std::string& args) {
  std::string command = std::string(TRELLIS_CLI_PATH) + " " + args + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) output.append(buf.data(), n);
  int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

std::string stdout_only(const std::string& args) {
  return run_cli(args + " 2>/dev/null").output;
}

class CliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = testing::temp_dir() + "/cli-tiny.gguf";
    CommandResult synth = run_cli("model synth --preset tiny --type q8_0 --seed 5 -o " + model_);
    ASSERT_EQ(synth.exit_code, 0) << synth.output;
  }
  static std::string model_;
};
std::string CliTest::model_;

TEST_F(CliTest, ModelInfoTextAndJson) {
  CommandResult text = run_cli("model info " + model_);
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("architecture:   llama"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("embedding_length = 128"), std::string::npos);
  EXPECT_NE(text.output.find("llama (SPM)"), std::string::npos);
  EXPECT_NE(text.output.find("q8_0 x"), std::string::npos);

  nlohmann::json j = nlohmann::json::parse(stdout_only("model info --json " + model_));
  EXPECT_EQ(j["architecture"], "llama");
  EXPECT_EQ(j["hyperparameters"]["block_count"], 4);
  EXPECT_EQ(j["tokenizer"]["vocab_size"], 2048);
  EXPECT_EQ(j["tensor_count"], 39);
  EXPECT_EQ(j["tensor_types"]["q8_0"], 30);  // 4 layers x 7 matrices + embeddings + output
  EXPECT_EQ(j["tensor_types"]["f32"], 9);    // 2 norms per layer + the output norm
}

TEST_F(CliTest, TokenizeAndDetokenizeRoundTrip) {
  std::string ids = stdout_only("tokenize -m " + model_ + " 'Hello world'");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.rfind("1 ", 0), 0u) << "BOS first: " << ids;
  std::string no_bos = stdout_only("tokenize --no-bos -m " + model_ + " 'Hello world'");
  EXPECT_EQ("1 " + no_bos, ids);
  no_bos.pop_back();  // newline
  std::string text = stdout_only("detokenize -m " + model_ + " " + no_bos);
  EXPECT_NE(text.find("Hello world"), std::string::npos) << text;

  nlohmann::json j = nlohmann::json::parse(stdout_only("tokenize --json -m " + model_ + " 'Hi'"));
  ASSERT_TRUE(j.is_array());
  EXPECT_EQ(j[0]["id"], 1);
  EXPECT_EQ(j[0]["piece"], "<s>");
}

TEST_F(CliTest, BadInputGivesClearErrors) {
  CommandResult missing = run_cli("model info /nonexistent.gguf");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("/nonexistent.gguf: cannot open"), std::string::npos);

  std::string garbage = testing::temp_dir() + "/garbage.gguf";
  std::ofstream(garbage) << "this is not a model";
  CommandResult bad = run_cli("model info " + garbage);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("bad magic"), std::string::npos) << bad.output;

  CommandResult preset = run_cli("model synth --preset huge -o /tmp/x.gguf");
  EXPECT_EQ(preset.exit_code, 1);
  EXPECT_NE(preset.output.find("unknown preset 'huge'"), std::string::npos);
  CommandResult type = run_cli("model synth --type q6_k -o /tmp/x.gguf");
  EXPECT_EQ(type.exit_code, 1);
  EXPECT_NE(type.output.find("unsupported type"), std::string::npos);

  CommandResult out_of_range = run_cli("detokenize -m " + model_ + " 5 99999");
  EXPECT_EQ(out_of_range.exit_code, 1);
  EXPECT_NE(out_of_range.output.find("outside the vocab"), std::string::npos);
  EXPECT_NE(run_cli("tokenize").exit_code, 0) << "missing arguments";
}

TEST(Cli, TokenizesWithARealVocab) {
  TRELLIS_REQUIRE_SHARED();
  std::string vocab = testing::shared_dir() + "/tokenizer-vectors/ggml-vocab-llama-spm.gguf";
  // " 15043 3186" is the vector file's expectation for "Hello world".
  EXPECT_EQ(stdout_only("tokenize --no-bos -m " + vocab + " 'Hello world'"), "15043 3186\n");
  EXPECT_EQ(stdout_only("tokenize -m " + vocab + " 'Hello world'"), "1 15043 3186\n");
}

}  // namespace
}  // namespace trellis
