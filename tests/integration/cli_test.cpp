// The `trellis` binary end to end: exit codes, output formats, and clear errors on bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <vector>

#include "cli_runner.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "test_support.h"

namespace trellis {
namespace {

using testing::CommandResult;
using testing::run_cli;
using testing::run_shell;

std::string stdout_only(const std::string& args) {
  return run_cli(args, false).output;
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

TEST_F(CliTest, SynthArchWritesThatFamily) {
  const std::string path = testing::temp_dir() + "/cli-tiny-qwen3.gguf";
  CommandResult synth = run_cli("model synth --preset tiny --arch qwen3 --type q8_0 -o " + path);
  ASSERT_EQ(synth.exit_code, 0) << synth.output;
  nlohmann::json info = nlohmann::json::parse(stdout_only("model info --json " + path));
  EXPECT_EQ(info["architecture"], "qwen3");
  EXPECT_EQ(info["hyperparameters"]["attention.key_length"], 64);
  CommandResult run = run_cli("generate -m " + path + " -p hello -n 3");
  EXPECT_EQ(run.exit_code, 0) << run.output;
}

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

// `trellis --version` says what a bug report needs: the version, the commit, the compiler and the
// kernels this CPU gets.
TEST(CliVersion, NamesVersionCommitCompilerAndKernels) {
  const std::string out = stdout_only("--version");
  EXPECT_EQ(out.rfind("trellis 0.", 0), 0u) << out;
  EXPECT_NE(out.find("(commit "), std::string::npos) << out;
  EXPECT_NE(out.find(", kernels "), std::string::npos) << out;
  const bool isa = out.find("kernels scalar") != std::string::npos ||
                   out.find("kernels avx2") != std::string::npos ||
                   out.find("kernels avx512") != std::string::npos ||
                   out.find("kernels neon") != std::string::npos;
  EXPECT_TRUE(isa) << out;
}

// The bash completion (scripts/completions/trellis.bash) offers the subcommands and options that
// the binary's own --help lists, at any depth.
TEST(CliCompletion, OffersSubcommandsAndOptionsFromHelp) {
  const std::string script = std::string(TRELLIS_SOURCE_DIR) + "/scripts/completions/trellis.bash";
  auto complete = [&](const std::string& words, int current) {
    return run_shell("bash -c 'source " + script + "; COMP_WORDS=(" +
                     std::string(TRELLIS_CLI_PATH) + " " + words + "); COMP_CWORD=" +
                     std::to_string(current) + "; _trellis; echo \"${COMPREPLY[*]}\"' 2>&1")
        .output;
  };
  EXPECT_EQ(complete("se", 1), "serve\n");
  EXPECT_EQ(complete("serve --po", 2), "--port\n");
  EXPECT_EQ(complete("model synth --preset tiny --poo", 5), "--pooling\n");
  EXPECT_EQ(complete("bench em", 2), "embed\n");
  EXPECT_NE(complete("e", 1).find("embed"), std::string::npos);
}

// `trellis embed` on synthesized encoders: one line of unit-length floats per text, a reranker's
// documents by score, and what does not fit refused with a message.
// serve --config FILE: its lines become flags (the model named there is the one served; the
// later of two lines of one name), the command line's flags win, and a name that is no flag or a line that is no `name = value` is
// refused by name.
TEST(CliServeConfig, ReadsFlagsFromTheFile) {
  const std::string dir = testing::temp_dir();
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name) << text;
    return dir + "/" + name;
  };
  const std::string conf = write("serve.conf",
                                 "# the service's flags\nhost = \"127.0.0.1\"\nport = 0\n"
                                 "model = " + dir + "/overridden.gguf\nquiet = true\nswa-full = false\n"
                                 "model = " + dir + "/from-config.gguf\n");
  const CommandResult from_file = run_cli("serve --config " + conf);
  EXPECT_NE(from_file.exit_code, 0);
  EXPECT_NE(from_file.output.find("from-config.gguf"), std::string::npos) << from_file.output;
  EXPECT_EQ(from_file.output.find("overridden.gguf"), std::string::npos) << from_file.output;
  const CommandResult overridden =
      run_cli("serve --config=" + conf + " -m " + dir + "/from-command-line.gguf");
  EXPECT_NE(overridden.output.find("from-command-line.gguf"), std::string::npos)
      << overridden.output;
  EXPECT_EQ(overridden.output.find("from-config.gguf"), std::string::npos) << overridden.output;
  const CommandResult unknown = run_cli("serve --config " + write("bad.conf", "bogus-flag = 3\n"));
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.output.find("--bogus-flag"), std::string::npos) << unknown.output;
  const CommandResult malformed =
      run_cli("serve --config " + write("worse.conf", "port = 1\njust words\n"));
  EXPECT_NE(malformed.exit_code, 0);
  EXPECT_NE(malformed.output.find("worse.conf:2: expected 'name = value'"), std::string::npos)
      << malformed.output;
}

// model quantize: a file of F32 weights to a llama.cpp file type, which then runs; a type it does
// not write, and an input already quantized, are refused by name.
TEST(CliQuantize, QuantizesAndRefuses) {
  const std::string dir = testing::temp_dir();
  ASSERT_EQ(run_cli("model synth --preset tiny --type f32 -o " + dir + "/f.gguf").exit_code, 0);
  const CommandResult done = run_cli("model quantize " + dir + "/f.gguf " + dir + "/q.gguf Q4_K_M");
  ASSERT_EQ(done.exit_code, 0) << done.output;
  EXPECT_NE(done.output.find("output.weight"), std::string::npos) << done.output;
  EXPECT_NE(done.output.find("30 of 39 tensors quantized"), std::string::npos) << done.output;
  EXPECT_EQ(run_cli("generate -m " + dir + "/q.gguf -p hello -n 4 --temp 0").exit_code, 0);
  const CommandResult bad_type = run_cli("model quantize " + dir + "/f.gguf " + dir + "/x.gguf q2_k");
  EXPECT_NE(bad_type.exit_code, 0);
  EXPECT_NE(bad_type.output.find("unsupported file type 'q2_k'"), std::string::npos)
      << bad_type.output;
  const CommandResult twice = run_cli("model quantize " + dir + "/q.gguf " + dir + "/x.gguf q8_0");
  EXPECT_NE(twice.exit_code, 0);
  EXPECT_NE(twice.output.find("' is already q5_0; quantize from a file of F32"),
            std::string::npos)
      << twice.output;
}

// An importance matrix computed through the engine weighs a quantization; mistakes are refused.
TEST(CliQuantize, ImportanceMatrixFromTextThenQuantize) {
  const std::string dir = testing::temp_dir();
  ASSERT_EQ(run_cli("model synth --preset tiny --type f32 -o " + dir + "/imf.gguf").exit_code, 0);
  {
    std::ofstream text(dir + "/text.txt");
    for (int i = 0; i < 200; ++i) text << "the cat sat on the mat " << i << " times. ";
  }
  const CommandResult made = run_cli("model imatrix -m " + dir + "/imf.gguf -f " + dir +
                                     "/text.txt -o " + dir + "/im.gguf --chunk 64 -t 1");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  EXPECT_NE(made.output.find("matrices"), std::string::npos) << made.output;
  const CommandResult quantized = run_cli("model quantize " + dir + "/imf.gguf " + dir +
                                          "/imq.gguf q4_k_m --imatrix " + dir + "/im.gguf");
  ASSERT_EQ(quantized.exit_code, 0) << quantized.output;
  EXPECT_NE(quantized.output.find("(imatrix)"), std::string::npos) << quantized.output;
  EXPECT_NE(quantized.output.find("the importance matrix weighed"), std::string::npos);
  EXPECT_EQ(run_cli("generate -m " + dir + "/imq.gguf -p hello -n 4 --temp 0").exit_code, 0);
  const CommandResult not_imatrix = run_cli("model quantize " + dir + "/imf.gguf " + dir +
                                            "/x.gguf q4_k_m --imatrix " + dir + "/imq.gguf");
  EXPECT_NE(not_imatrix.exit_code, 0);
  EXPECT_NE(not_imatrix.output.find("not an importance matrix"), std::string::npos)
      << not_imatrix.output;
  const CommandResult short_text = run_cli("model imatrix -m " + dir + "/imf.gguf -f " + dir +
                                           "/text.txt -o " + dir + "/x.gguf --chunk 100000");
  EXPECT_NE(short_text.exit_code, 0);
  EXPECT_NE(short_text.output.find("fewer than one chunk"), std::string::npos)
      << short_text.output;
}

TEST(CliEmbed, EmbedsTextsAndRanksDocuments) {
  const std::string dir = testing::temp_dir();
  ASSERT_EQ(
      run_cli("model synth --arch bert --preset tiny --type q8_0 -o " + dir + "/e.gguf").exit_code,
      0);
  ASSERT_EQ(run_cli("model synth --arch bert --preset tiny --type q8_0 --pooling rank -o " + dir +
                    "/r.gguf")
                .exit_code,
            0);
  EXPECT_NE(
      run_cli("model info " + dir + "/r.gguf").output.find("yes (bert forward pass, reranker)"),
      std::string::npos);
  const std::string lines = stdout_only("embed -m " + dir + "/e.gguf 'hello world' 'the cat'");
  std::istringstream in(lines);
  int n_lines = 0;
  for (std::string line; std::getline(in, line); ++n_lines) {
    std::istringstream values(line);
    double sum_sq = 0;
    int n = 0;
    for (double v; values >> v; ++n) sum_sq += v * v;
    EXPECT_EQ(n, 128);
    EXPECT_NEAR(sum_sq, 1.0, 1e-4);
  }
  EXPECT_EQ(n_lines, 2);
  const std::string ranked =
      stdout_only("embed -m " + dir + "/r.gguf --query 'capital of france' 'paris' 'cats' 'dogs'");
  EXPECT_EQ(std::count(ranked.begin(), ranked.end(), '\n'), 3) << ranked;
  CommandResult wrong = run_cli("embed -m " + dir + "/e.gguf --query q 'doc'");
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_NE(wrong.output.find("--query is for rerankers"), std::string::npos) << wrong.output;
}

TEST(CliModelInfo, NamesTheFamilyAndTheFirstMissingTensor) {
  TRELLIS_REQUIRE_SHARED();
  const std::string qwen2 = testing::shared_dir() + "/reference-arch/qwen2-tiny-f32.gguf";
  CommandResult ok = run_cli("model info " + qwen2);
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("runs:           yes (qwen2 forward pass, generative model)"),
            std::string::npos)
      << ok.output;
  const std::string broken = testing::rewrite_gguf(qwen2, "without-blk.1.attn_k.bias", "",
                                                   std::nullopt, "blk.1.attn_k.bias");
  nlohmann::json j = nlohmann::json::parse(stdout_only("model info --json " + broken));
  EXPECT_EQ(j["architecture"], "qwen2");
  EXPECT_FALSE(j["runnable"].get<bool>());
  EXPECT_NE(j["not_runnable_because"].get<std::string>().find(
                "missing tensor 'blk.1.attn_k.bias' (required by the qwen2 architecture)"),
            std::string::npos)
      << j["not_runnable_because"];
  // A Phi-3.5-style file whose LongRoPE factors hold a zero divisor is refused by name.
  const std::string longrope = testing::temp_dir() + "/phi3-longrope.gguf";
  {
    Result<GgufFile> in =
        GgufFile::open(testing::shared_dir() + "/reference-arch/phi3-tiny-f32.gguf");
    ASSERT_TRUE(in.ok());
    GgufWriter writer;
    writer.copy_metadata(*in, "");
    for (const GgufTensor& t : in->tensors())
      ASSERT_TRUE(writer.add_tensor(t.name, t.type, t.shape).ok());
    ASSERT_TRUE(writer.add_tensor("rope_factors_long.weight", DType::F32, {32}).ok());
    ASSERT_TRUE(writer.begin(longrope).ok());
    for (const GgufTensor& t : in->tensors()) {
      ASSERT_TRUE(writer
                      .write_tensor_data(std::span<const uint8_t>(
                          static_cast<const uint8_t*>(t.data), static_cast<size_t>(t.n_bytes)))
                      .ok());
    }
    std::vector<float> factors(32, 1.0f);
    factors[5] = 0.0f;
    ASSERT_TRUE(writer
                    .write_tensor_data(std::span<const uint8_t>(
                        reinterpret_cast<const uint8_t*>(factors.data()), factors.size() * 4))
                    .ok());
    ASSERT_TRUE(writer.finish().ok());
  }
  nlohmann::json lr = nlohmann::json::parse(stdout_only("model info --json " + longrope));
  EXPECT_FALSE(lr["runnable"].get<bool>());
  EXPECT_NE(lr["not_runnable_because"].get<std::string>().find(
                "'rope_factors_long.weight' holds a factor that is not positive"),
            std::string::npos)
      << lr["not_runnable_because"];
  CommandResult run = run_cli("generate -n 2 -m " + broken + " -p hello");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.output.find("missing tensor 'blk.1.attn_k.bias'"), std::string::npos) << run.output;
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
  CommandResult type = run_cli("model synth --type q8_k -o /tmp/x.gguf");
  EXPECT_EQ(type.exit_code, 1);
  EXPECT_NE(type.output.find("unsupported type"), std::string::npos);
  CommandResult arch = run_cli("model synth --arch gpt2 -o /tmp/x.gguf");
  EXPECT_EQ(arch.exit_code, 1);
  EXPECT_NE(arch.output.find("unknown architecture 'gpt2'"), std::string::npos) << arch.output;

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

namespace trellis {
namespace {

using testing::CommandResult;
using testing::run_cli;
using testing::run_shell;

std::string stories_model() {
  return testing::shared_dir() + "/models/stories260K.gguf";
}

TEST(CliGenerate, JsonHasTokensTextAndTimings) {
  TRELLIS_REQUIRE_SHARED();
  std::string out = stdout_only("generate --json -t 1 --temp 0 -n 5 -m " + stories_model() +
                                " -p 'Once upon a time' -p 'Once upon a time'");
  std::istringstream lines(out);
  std::string line;
  int n_lines = 0;
  while (std::getline(lines, line)) {
    nlohmann::json j = nlohmann::json::parse(line);
    // The reference implementation's greedy continuation of this prompt starts 432 383 286 261 376.
    EXPECT_EQ(j["prompt_tokens"], nlohmann::json({1, 403, 407, 261, 378}));
    EXPECT_EQ(j["generated_tokens"], nlohmann::json({432, 383, 286, 261, 376}));
    EXPECT_EQ(j["text"], ", there was a little");
    EXPECT_EQ(j["finish_reason"], "length");
    EXPECT_GT(j["timings"]["generation_tokens_per_s"].get<double>(), 0);
    EXPECT_GE(j["timings"]["ttft_ms"].get<double>(), 0);
    ++n_lines;
  }
  EXPECT_EQ(n_lines, 2) << "one object per prompt, in order";
}

TEST(CliGenerate, StreamsTextAndRejectsBadInput) {
  TRELLIS_REQUIRE_SHARED();
  CommandResult streamed =
      run_cli("generate -t 1 --temp 0 -n 5 -m " + stories_model() + " -p 'Once upon a time'");
  EXPECT_EQ(streamed.exit_code, 0);
  EXPECT_NE(streamed.output.find("Once upon a time, there was a"), std::string::npos)
      << streamed.output;
  EXPECT_NE(streamed.output.find("tokens/s"), std::string::npos);

  CommandResult too_long =
      run_cli("generate --ctx 4 -m " + stories_model() + " -p 'Once upon a time there'");
  EXPECT_EQ(too_long.exit_code, 1);
  EXPECT_NE(too_long.output.find("more than the context of 4"), std::string::npos)
      << too_long.output;
  CommandResult no_prompt = run_cli("generate -m " + stories_model());
  EXPECT_EQ(no_prompt.exit_code, 1);
  CommandResult bad_temp = run_cli("generate --temp -1 -m " + stories_model() + " -p x");
  EXPECT_EQ(bad_temp.exit_code, 1);
  EXPECT_NE(bad_temp.output.find("temperature"), std::string::npos) << bad_temp.output;

  std::string prompts = testing::temp_dir() + "/prompts.txt";
  std::ofstream(prompts) << "\"Once upon a time\"\nnot json\n";
  CommandResult bad_file = run_cli("generate -m " + stories_model() + " --prompts-file " + prompts);
  EXPECT_EQ(bad_file.exit_code, 1);
  EXPECT_NE(bad_file.output.find("prompts.txt:2"), std::string::npos) << bad_file.output;
}

TEST(CliGenerate, StopsBeforeAStopString) {
  TRELLIS_REQUIRE_SHARED();
  // Greedy continuation: ", there was a little girl named Lily. She loved to play ..."
  nlohmann::json j = nlohmann::json::parse(
      stdout_only("generate --json -t 1 --temp 0 -n 40 --stop ' Lily' --stop 'zzz' -m " +
                  stories_model() + " -p 'Once upon a time'"));
  EXPECT_EQ(j["text"], ", there was a little girl named");
  EXPECT_EQ(j["finish_reason"], "stop");
  EXPECT_LT(j["generated_tokens"].size(), 40u);
}

std::vector<nlohmann::json> json_lines(const std::string& out) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

TEST_F(CliTest, LaterPromptsReuseTheCachedPrefixWithIdenticalOutputs) {
  // Three token prompts: 40 shared tokens + their own 5; then the first again.
  std::string prompts = testing::temp_dir() + "/shared-prefix.txt";
  {
    std::ofstream out(prompts);
    for (int p : {0, 1, 0}) {
      nlohmann::json ids = nlohmann::json::array();
      for (int i = 0; i < 40; ++i) ids.push_back(100 + i);
      for (int i = 0; i < 5; ++i) ids.push_back(1000 + 10 * p + i);
      out << ids.dump() << "\n";
    }
  }
  const std::string common = "generate --json -t 1 --temp 0 -n 6 --block-size 16 -m " + model_ +
                             " --prompts-file " + prompts;
  std::vector<nlohmann::json> on = json_lines(stdout_only(common));
  std::vector<nlohmann::json> off = json_lines(stdout_only(common + " --prefix-cache off"));
  std::vector<nlohmann::json> block = json_lines(stdout_only(common + " --match block"));
  // 96 KiB: 6 blocks of 16 tokens x 1 KiB, so the third prompt must evict the second's blocks.
  std::vector<nlohmann::json> tight = json_lines(stdout_only(common + " --kv-mem 96KiB"));
  ASSERT_EQ(on.size(), 3u);
  ASSERT_EQ(off.size(), 3u);
  ASSERT_EQ(block.size(), 3u);
  ASSERT_EQ(tight.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(on[i]["generated_tokens"], off[i]["generated_tokens"]) << i;
    EXPECT_EQ(block[i]["generated_tokens"], off[i]["generated_tokens"]) << i;
    EXPECT_EQ(tight[i]["generated_tokens"], off[i]["generated_tokens"]) << i;
    EXPECT_EQ(off[i]["cached_tokens"], 0);
    EXPECT_EQ(off[i]["kv_blocks_acquired"], 0);
  }
  // 45 prompt + 5 decoded positions = 4 blocks of 16.
  EXPECT_EQ(on[0]["cached_tokens"], 0);
  EXPECT_EQ(on[0]["kv_blocks_allocated"], 4);
  EXPECT_EQ(on[1]["cached_tokens"], 40);       // the shared tokens
  EXPECT_EQ(on[1]["kv_blocks_acquired"], 2);   // positions 0-31
  EXPECT_EQ(on[1]["kv_blocks_allocated"], 2);  // a copy of block 2 (slots 0-7), then block 3
  EXPECT_EQ(on[2]["cached_tokens"], 44);       // all but the last prompt token
  EXPECT_EQ(block[1]["cached_tokens"], 32);    // whole blocks only
  EXPECT_EQ(block[2]["cached_tokens"], 32);
  CommandResult bad_mem = run_cli(common + " --kv-mem 12XB");
  EXPECT_EQ(bad_mem.exit_code, 1);
  EXPECT_NE(bad_mem.output.find("--kv-mem"), std::string::npos) << bad_mem.output;
  CommandResult bad_mode = run_cli(common + " --match half");
  EXPECT_EQ(bad_mode.exit_code, 1);
  EXPECT_NE(bad_mode.output.find("--match must be token or block"), std::string::npos);
  CommandResult bad_switch = run_cli(common + " --prefix-cache maybe");
  EXPECT_EQ(bad_switch.exit_code, 1);
  CommandResult bad_kv_type = run_cli(common + " --kv-type-v q4_1");
  EXPECT_EQ(bad_kv_type.exit_code, 1);
  EXPECT_NE(bad_kv_type.output.find("--kv-type-v must be f16, q8_0, q4_0 or f32, not 'q4_1'"),
            std::string::npos)
      << bad_kv_type.output;
  CommandResult small_pool = run_cli(common + " --kv-tokens 16");
  EXPECT_EQ(small_pool.exit_code, 1);
  EXPECT_NE(small_pool.output.find("too small"), std::string::npos) << small_pool.output;
}

TEST(CliLogits, TopLogitsOfEveryPosition) {
  TRELLIS_REQUIRE_SHARED();
  nlohmann::json j = nlohmann::json::parse(stdout_only(
      "logits --json --all-positions --top 3 -t 1 -m " + stories_model() + " -p 'Once upon'"));
  ASSERT_EQ(j["positions"].size(), 3u);  // BOS, Once, upon
  EXPECT_EQ(j["positions"][0]["token"], 1);
  EXPECT_EQ(j["positions"][0]["top"][0][0], 403) << "after BOS the model predicts ' Once'";
  EXPECT_NEAR(j["positions"][0]["top"][0][1].get<double>(), 17.02, 0.01);
  EXPECT_EQ(j["positions"][2]["pos"], 2);
  // Without --all-positions: the last position only, the same values.
  nlohmann::json last = nlohmann::json::parse(
      stdout_only("logits --json --top 3 -t 1 -m " + stories_model() + " -p 'Once upon'"));
  ASSERT_EQ(last["positions"].size(), 1u);
  EXPECT_EQ(last["positions"][0], j["positions"][2]);
  // Token-id prompts from a file, one JSON line each: the same ids give the same logits.
  const std::string file = testing::temp_dir() + "/logit-prompts.jsonl";
  std::ofstream(file) << "[1, 403, 407]\n\n\"Once\"\n";
  std::istringstream lines(
      stdout_only("logits --top 3 -t 1 -m " + stories_model() + " --prompts-file " + file));
  std::string line;
  ASSERT_TRUE(std::getline(lines, line));
  EXPECT_EQ(nlohmann::json::parse(line)["positions"][0], j["positions"][2]);
  ASSERT_TRUE(std::getline(lines, line));
  EXPECT_EQ(nlohmann::json::parse(line)["positions"][0]["token"], 403) << "BOS, then 'Once'";
  EXPECT_FALSE(std::getline(lines, line)) << "one line per prompt";
  std::ofstream(file) << "[1, -4]\n";
  CommandResult bad = run_cli("logits -m " + stories_model() + " --prompts-file " + file);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find(":1: token ids must be non-negative integers"), std::string::npos)
      << bad.output;
}

TEST_F(CliTest, BenchPhiReportsTheCacheGainWithIdenticalOutputs) {
  const std::string out_dir = testing::temp_dir() + "/phi-results";
  CommandResult run = run_cli("bench phi --json -t 1 -L 40 -D 3 -N 2 -B 8 --phi 0,0.5,max --out " +
                                  out_dir + " -m " + model_,
                              false);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  nlohmann::json j = nlohmann::json::parse(run.output);
  ASSERT_EQ(j["points"].size(), 3u);
  const std::vector<int> shared = {0, 24, 32};  // round(0.5 * 40 / 8) = 3 blocks; max: all but one
  for (size_t i = 0; i < 3; ++i) {
    const nlohmann::json& p = j["points"][i];
    EXPECT_EQ(p["shared_tokens"], shared[i]);
    EXPECT_TRUE(p["outputs_identical"].get<bool>());
    EXPECT_EQ(p["cache_off"]["prefill_tokens"], 80);
    EXPECT_EQ(p["cache_off"]["kv_blocks_acquired"], 0);
    EXPECT_EQ(p["cache_on"]["prefill_tokens"], 80 - 2 * shared[i]);
    EXPECT_EQ(p["cache_on"]["kv_blocks_acquired"], 2 * shared[i] / 8);
    EXPECT_GT(p["cache_on"]["ttft_ms"].get<double>(), 0);
  }
  // The record: machine, model file with its SHA-256, and a CSV row per point and cache mode.
  EXPECT_EQ(j["model"]["sha256"].get<std::string>().size(), 64u);
  EXPECT_GT(j["machine"]["logical_cores"].get<int>(), 0);
  EXPECT_GT(j["points"][0]["cache_off"]["heap_allocations"].get<int64_t>(), 0);
  std::ifstream json_file(out_dir + "/results.json");
  EXPECT_EQ(nlohmann::json::parse(json_file), j);
  std::ifstream csv(out_dir + "/results.csv");
  std::string line;
  int n_lines = 0;
  while (std::getline(csv, line)) ++n_lines;
  EXPECT_EQ(n_lines, 1 + 3 * 2);
  CommandResult bad = run_cli("bench phi --phi 0.5,2 -m " + model_);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("'2' is not a number in [0, 1]"), std::string::npos) << bad.output;
}

// The same prompt twice in one run: the second answer is drafted from the first one's cached
// tokens (speculative decoding, on by default), sampled with the run's seed, and comes out the
// same as with --spec off.
TEST_F(CliTest, TheSamePromptTwiceDraftsTheSecondAnswerFromTheFirst) {
  const std::string common = "generate --json -t 2 --temp 0.7 -s 5 -n 24 --ignore-eos -B 8 -m " +
                             model_ + " -p 'one two three four' -p 'one two three four'";
  std::vector<nlohmann::json> on = json_lines(stdout_only(common));
  std::vector<nlohmann::json> off = json_lines(stdout_only(common + " --spec off"));
  std::vector<nlohmann::json> lookup = json_lines(stdout_only(common + " --spec prompt_lookup"));
  ASSERT_EQ(on.size(), 2u);
  ASSERT_EQ(off.size(), 2u);
  ASSERT_EQ(lookup.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(on[i]["generated_tokens"], off[i]["generated_tokens"]) << i;
    EXPECT_EQ(lookup[i]["generated_tokens"], off[i]["generated_tokens"]) << i;
    EXPECT_EQ(off[i]["draft_tokens"], 0) << i;
  }
  EXPECT_EQ(on[1]["generated_tokens"], on[0]["generated_tokens"]);
  // 23 decoded tokens, drafted 8 at a time from the tree: at least 16 kept.
  EXPECT_GE(on[1]["accepted_draft_tokens"].get<int>(), 16) << on[1].dump();
  CommandResult bad = run_cli(common + " --spec tree");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("--spec: unknown speculation source 'tree'"), std::string::npos)
      << bad.output;
}

// --draft-model: the model's own file drafts its greedy tokens (all kept but those past -n), and
// the output is that of --spec off; the flag and the source go together.
TEST_F(CliTest, ADraftModelDraftsAndTheOutputIsThatWithoutSpeculation) {
  const std::string common = "generate --json -t 2 --temp 0 -n 24 --ignore-eos -B 8 -m " + model_ +
                             " -p 'one two three four'";
  const std::string drafted = common + " --spec draft_model --draft-model " + model_;
  std::vector<nlohmann::json> off = json_lines(stdout_only(common + " --spec off"));
  std::vector<nlohmann::json> on = json_lines(stdout_only(drafted));
  ASSERT_EQ(off.size(), 1u);
  ASSERT_EQ(on.size(), 1u);
  EXPECT_EQ(on[0]["generated_tokens"], off[0]["generated_tokens"]);
  EXPECT_GE(on[0]["accepted_draft_tokens"].get<int>(), 16) << on[0].dump();
  CommandResult alone = run_cli(common + " --spec draft_model");
  EXPECT_EQ(alone.exit_code, 1);
  EXPECT_NE(alone.output.find("--spec draft_model needs --draft-model FILE"), std::string::npos)
      << alone.output;
  CommandResult unused = run_cli(common + " --spec off --draft-model " + model_);
  EXPECT_EQ(unused.exit_code, 1);
  EXPECT_NE(unused.output.find("--draft-model needs --spec on"), std::string::npos)
      << unused.output;
}

TEST_F(CliTest, ParallelPromptsGiveTheSequentialOutputsInOrder) {
  const std::string common = "generate --json -t 2 --temp 0 -n 6 -B 8 -m " + model_ +
                             " -p 'one two three four five six seven' -p 'one two three four "
                             "five eight' -p 'nine ten'";
  std::vector<nlohmann::json> seq = json_lines(stdout_only(common));
  std::vector<nlohmann::json> par = json_lines(stdout_only(common + " --parallel --max-seqs 2"));
  std::vector<nlohmann::json> fcfs =
      json_lines(stdout_only(common + " --parallel --schedule fcfs --batch-tokens 4"));
  ASSERT_EQ(seq.size(), 3u);
  ASSERT_EQ(par.size(), 3u);
  ASSERT_EQ(fcfs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(par[i]["prompt"], seq[i]["prompt"]);
    EXPECT_EQ(par[i]["generated_tokens"], seq[i]["generated_tokens"]) << i;
    EXPECT_EQ(fcfs[i]["generated_tokens"], seq[i]["generated_tokens"]) << i;
    EXPECT_GE(par[i]["queue_ms"].get<double>(), 0);
  }
  CommandResult bad = run_cli(common + " --schedule random");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("--schedule must be lpm or fcfs"), std::string::npos) << bad.output;
}

TEST_F(CliTest, ForkGivesSamplesThatShareThePrompt) {
  std::vector<nlohmann::json> lines =
      json_lines(stdout_only("generate --json -t 1 --temp 0.9 -s 7 -n 5 -B 4 --fork 3 -m " +
                             model_ + " -p 'a shared prompt for three samples'"));
  ASSERT_EQ(lines.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(lines[static_cast<size_t>(i)]["sample"], i);
    EXPECT_EQ(lines[static_cast<size_t>(i)]["prompt_tokens"], lines[0]["prompt_tokens"]);
    EXPECT_EQ(lines[static_cast<size_t>(i)]["generated_tokens"].size(), 5u);
  }
  const int n_prompt = static_cast<int>(lines[0]["prompt_tokens"].size());
  EXPECT_EQ(lines[1]["cached_tokens"], n_prompt);  // the prompt was computed once
  EXPECT_EQ(lines[2]["kv_blocks_acquired"], n_prompt / 4);
  EXPECT_NE(lines[0]["generated_tokens"], lines[1]["generated_tokens"]);
  CommandResult bad = run_cli("generate --fork 0 -m " + model_ + " -p x");
  EXPECT_EQ(bad.exit_code, 1);
}

TEST_F(CliTest, BenchTtftProbesOneRequestAndReportsTheReachableHitRate) {
  CommandResult run = run_cli("bench ttft --json -t 1 -L 32 -B 8 --reps 2 --phi 0,max --out " +
                                  testing::temp_dir() + "/ttft-results -m " + model_,
                              false);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  nlohmann::json j = nlohmann::json::parse(run.output);
  EXPECT_EQ(j["bench"], "ttft");
  EXPECT_EQ(j["N"], 1);
  EXPECT_DOUBLE_EQ(j["max_hit_rate"].get<double>(), 0.75);  // (32/8 - 1) / (32/8)
  ASSERT_EQ(j["points"].size(), 2u);
  EXPECT_EQ(j["points"][1]["cache_on"]["cached_tokens"], 24);
  EXPECT_EQ(j["points"][1]["cache_on"]["prefill_tokens"], 8);
  EXPECT_GE(j["points"][1]["cache_on"]["ttft_ms_stddev"].get<double>(), 0);
}

TEST_F(CliTest, BenchWorkloadAgentsLpmKeepsGroupsCached) {
  // A pool too small for every group's prefix: FCFS over interleaved groups evicts each prefix
  // before its group comes back; LPM serves a group while its prefix is cached.
  CommandResult run = run_cli(
      "bench workload agents --json -t 1 -B 16 --kv-tokens 300 --max-seqs 2 --groups 4 "
      "--per-group 3 --prefix-len 96 --suffix-len 16 -D 2 --out " +
          testing::temp_dir() + "/workload-results -m " + model_,
      false);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  nlohmann::json j = nlohmann::json::parse(run.output);
  ASSERT_EQ(j["runs"].size(), 3u);
  EXPECT_TRUE(j["outputs_identical"].get<bool>());
  EXPECT_EQ(j["runs"][0]["run"], "cache off");
  EXPECT_EQ(j["runs"][0]["cached_tokens"], 0);
  const double fcfs = j["runs"][1]["hit_rate"].get<double>();
  const double lpm = j["runs"][2]["hit_rate"].get<double>();
  EXPECT_GT(lpm, fcfs);
  EXPECT_GT(lpm, 0.5);  // 8 of 12 requests find their group's 96 tokens cached
  for (const nlohmann::json& r : j["runs"]) {
    EXPECT_EQ(r["prompt_tokens"], 12 * 112);
    EXPECT_GE(r["latency_ms_p99"].get<double>(), r["latency_ms_p50"].get<double>());
  }
  std::ifstream csv(testing::temp_dir() + "/workload-results/results.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_EQ(header.rfind("run,prompt_tokens,cached_tokens,hit_rate", 0), 0u) << header;
  CommandResult unknown = run_cli("bench workload nonsense -m " + model_);
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.output.find("unknown workload"), std::string::npos);
}

TEST(CliBench, SpeedPrintsJson) {
  TRELLIS_REQUIRE_SHARED();
  nlohmann::json j = nlohmann::json::parse(
      stdout_only("bench speed --json -t 1 -p 16 -n 8 -r 2 -m " + stories_model()));
  EXPECT_EQ(j["threads"], 1);
  EXPECT_EQ(j["n_prompt"], 16);
  EXPECT_EQ(j["n_gen"], 8);
  EXPECT_EQ(j["reps"], 2);
  // Rates are machine-dependent: only that each was measured.
  EXPECT_GT(j["prompt_tokens_per_s"].get<double>(), 0);
  EXPECT_GT(j["generation_tokens_per_s"].get<double>(), 0);
  EXPECT_GT(j["peak_rss_bytes"].get<double>(), 0);
}

TEST(CliBench, SpeedAtDepthReportsTheKvHeldAndSwaFullHoldsMore) {
  // Gemma 3's local layers (2 of 4 in the tiny model, window 32) keep their window only, unless
  // --swa-full keeps every layer whole. Chunks of 32: a step's window pages span ~4 blocks.
  const std::string common =
      "bench speed --json -t 1 -d 300 -n 4 -r 1 -B 16 --ctx 512 --batch-tokens 32 -m " +
      testing::tiny_gemma3_engine_model();
  const nlohmann::json windowed = nlohmann::json::parse(stdout_only(common));
  const nlohmann::json full = nlohmann::json::parse(stdout_only(common + " --swa-full"));
  EXPECT_EQ(windowed["kv_peak_tokens"], 304);
  EXPECT_EQ(full["kv_peak_tokens"], 304);
  // Full: 19 blocks of 4 layers; windowed: 19 blocks of 2 layers and ~5 pages of 2.
  EXPECT_LT(windowed["kv_peak_bytes"].get<double>(), 0.7 * full["kv_peak_bytes"].get<double>())
      << windowed["kv_peak_bytes"] << " vs " << full["kv_peak_bytes"];
}

TEST(CliBench, SpeedBatchedGivesARowPerBatchSize) {
  TRELLIS_REQUIRE_SHARED();
  nlohmann::json j = nlohmann::json::parse(
      stdout_only("bench speed --json -t 1 -p 16 -n 8 -r 1 --batch 1,3 -m " + stories_model()));
  ASSERT_EQ(j["batches"].size(), 2u);
  EXPECT_EQ(j["batches"][0]["n_sequences"], 1);
  EXPECT_EQ(j["batches"][1]["n_sequences"], 3);
  for (const nlohmann::json& row : j["batches"]) {
    EXPECT_GT(row["prompt_tokens_per_s"].get<double>(), 0);
    EXPECT_GT(row["generation_tokens_per_s"].get<double>(), 0);
  }
  CommandResult bad = run_cli("bench speed -t 1 -p 16 -n 8 --batch 0 -m " + stories_model());
  EXPECT_EQ(bad.exit_code, 1);
}

}  // namespace
}  // namespace trellis
