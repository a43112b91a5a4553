// `--pipeline` end to end: the real binary under mpirun on loopback. Generated tokens over 2 and 3
// ranks equal one process's; the server over 2 ranks passes the official `openai` client; killing
// a rank mid-stream ends the whole job, with an error, within a bound, leaving no rank behind;
// each rank's peak RSS is its share of the weights, not the whole file.
//
// Skipped, saying so, when the build has no MPI (tests/mpi/pipeline_mpi_test.cpp covers the
// engine-level exactness under mpirun too).
#include <dirent.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_runner.h"
#include "cli_server.h"
#include "test_support.h"

namespace trellis {
namespace {

using namespace testing::cli_server;
using testing::CommandResult;
using testing::run_shell;

#ifdef TRELLIS_MPIEXEC
#define REQUIRE_MPI() (void)0

// Set for every mpirun this binary starts: Open MPI refuses to start as root without the first
// two (CI runs as root); its libraries keep allocations until exit, which LeakSanitizer (in the
// sanitizer build) would report from every rank, so the MPI jobs run without leak detection.
class MpiEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    const char* asan = std::getenv("ASAN_OPTIONS");
    setenv("ASAN_OPTIONS", (std::string(asan ? asan : "") + ":detect_leaks=0").c_str(), 1);
  }
};
const ::testing::Environment* const kMpiEnvironment =
    ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

// More ranks than cores need --oversubscribe with Open MPI (TRELLIS_MPIEXEC_FLAGS).
std::vector<std::string> mpirun(int np) {
  std::vector<std::string> argv = {TRELLIS_MPIEXEC, "-np", std::to_string(np)};
  const std::string flags = TRELLIS_MPIEXEC_FLAGS;
  if (!flags.empty()) argv.push_back(flags);
  return argv;
}
std::string mpirun_command(int np) {
  std::string command;
  for (const std::string& a : mpirun(np)) command += a + " ";
  return command;
}
#else
#define REQUIRE_MPI() GTEST_SKIP() << "trellis was built without MPI (install libopenmpi-dev)"
#endif

// generated_tokens of each JSON line of `trellis generate --json`.
std::vector<json> generated(const std::string& output) {
  std::vector<json> tokens;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    json j = json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.contains("generated_tokens"))
      tokens.push_back(j["generated_tokens"]);
  }
  return tokens;
}

TEST(PipelineCli, GenerateOverTwoAndThreeRanksMatchesOneProcess) {
  REQUIRE_MPI();
#ifdef TRELLIS_MPIEXEC
  const std::string model = synth_tiny_model();
  ASSERT_FALSE(model.empty());
  // The last: quantized KV of two types, which every rank must store as rank 0 does.
  for (const std::string sampling :
       {"--temp 0", "--temp 0.9 --seed 42", "--temp 0 --kv-type-k q8_0 --kv-type-v q4_0"}) {
    const std::string args = "generate -m " + model +
                             " -p 'Once upon a time' -p 'Once upon a hill' -p 'The end' -n 24 "
                             "--ignore-eos --json -t 1 --batch-tokens 8 " +
                             sampling;
    const CommandResult alone = testing::run_cli(args, /*with_stderr=*/false);
    ASSERT_EQ(alone.exit_code, 0) << alone.output;
    const std::vector<json> expected = generated(alone.output);
    ASSERT_EQ(expected.size(), 3u) << alone.output;
    for (int np : {2, 3}) {
      const CommandResult split =
          run_shell(mpirun_command(np) + TRELLIS_CLI_PATH + " " + args +
                    " --pipeline --micro-batches " + std::to_string(np) + " 2>/dev/null");
      ASSERT_EQ(split.exit_code, 0) << split.output;
      EXPECT_EQ(generated(split.output), expected) << "np " << np << ", " << sampling;
    }
  }
#endif
}

// The pids of processes whose command line contains `needle`, with their MPI rank (-1: none).
std::vector<std::pair<pid_t, int>> processes_with(const std::string& needle) {
  std::vector<std::pair<pid_t, int>> found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* entry = readdir(proc)) {
    const pid_t pid = std::atoi(entry->d_name);
    if (pid <= 0 || pid == getpid()) continue;
    const std::string dir = std::string("/proc/") + entry->d_name;
    std::string cmdline = read_file(dir + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(needle) == std::string::npos || cmdline.find("mpirun") == 0) continue;
    std::string environ = read_file(dir + "/environ");
    int rank = -1;
    const std::string key = std::string("OMPI_COMM_WORLD_RANK=");
    const size_t at = environ.find(key);
    if (at != std::string::npos) rank = std::atoi(environ.c_str() + at + key.size());
    found.emplace_back(pid, rank);
  }
  closedir(proc);
  return found;
}

// The pid of the process of MPI rank `rank` running with `model`, or 0.
pid_t rank_pid(const std::string& model, int rank) {
  for (const auto& [pid, r] : processes_with(model)) {
    if (r == rank) return pid;
  }
  return 0;
}

// A tiny model file of the test's own, so that only its job's processes have the path.
std::string own_model(const std::string& name, int seed) {
  const std::string model = testing::temp_dir() + "/" + name + ".gguf";
  const std::string synth =
      "model synth --preset tiny --type q8_0 --seed " + std::to_string(seed) + " -o " + model;
  return testing::run_cli(synth).exit_code == 0 ? model : "";
}

// A stream long enough to be running when a rank is made to fail.
const char* const kLongStream =
    R"({"model":"tiny","prompt":"Once","max_tokens":4000,"stream":true,"ignore_eos":true})";

TEST(PipelineCli, ServerOverTwoRanksPassesTheOpenAiClient) {
  REQUIRE_MPI();
#ifdef TRELLIS_MPIEXEC
  if (!have_program("curl")) GTEST_SKIP() << "curl is not installed (scripts/install-deps.sh)";
  if (std::string why = openai_client_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const std::string model = synth_tiny_model();
  ASSERT_FALSE(model.empty());
  Server server(model, {"--pipeline", "--api-key", "node-key"}, "pipeline-node", mpirun(2));
  ASSERT_EQ(server.start(), "");
  const CommandResult run =
      run_openai_client_check(openai_node_modules(), server.url("/v1"), "node-key");
  EXPECT_EQ(run.exit_code, 0) << run.output << "\nserver log:\n" << server.log();
  expect_openai_client_passed(run);
  const HttpResult metrics = curl("GET", server.url("/metrics"));
  EXPECT_NE(metrics.body.find("trellis:pipeline_stage_busy_seconds_total{rank=\"1\""),
            std::string::npos)
      << metrics.body;
  // SIGTERM to rank 0 (mpirun itself exits 1 whenever it is signalled): rank 0 shuts down
  // gracefully and tells the other stage to stop, so the whole job ends as a success.
  const pid_t rank0 = rank_pid(model, 0);
  ASSERT_NE(rank0, 0);
  ASSERT_EQ(::kill(rank0, SIGTERM), 0);
  EXPECT_EQ(server.process().wait_exit(std::chrono::seconds(30)), 0) << server.log();
#endif
}

TEST(PipelineCli, KillingARankMidStreamEndsTheJob) {
  REQUIRE_MPI();
#ifdef TRELLIS_MPIEXEC
  if (!have_program("curl")) GTEST_SKIP() << "curl is not installed (scripts/install-deps.sh)";
  const std::string model = own_model("kill-test", 9);
  ASSERT_FALSE(model.empty());
  Server server(model, {"--pipeline", "--pipeline-timeout", "5", "--ctx", "4096"}, "pipeline-kill",
                mpirun(2));
  ASSERT_EQ(server.start(), "");
  // A long stream; rank 1 dies while it runs.
  std::thread client(
      [&] { curl("POST", server.url("/v1/completions"), kLongStream, "--max-time 60"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const pid_t victim = rank_pid(model, 1);
  ASSERT_NE(victim, 0) << "no rank 1 process found";
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  // The job ends within the bound: mpirun reports the dead rank and takes the others down (or
  // rank 0 notices the silence after --pipeline-timeout and ends the job).
  const std::optional<int> code = server.process().wait_exit(std::chrono::seconds(40));
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  client.join();
  EXPECT_TRUE(!code.has_value() || *code != 0) << "the job ended as a success:\n" << server.log();
  EXPECT_FALSE(server.process().running()) << "the job still runs " << took << " s after\n"
                                           << server.log();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_TRUE(processes_with(model).empty()) << "a rank outlived the job";
  const std::string log = server.log();
  EXPECT_TRUE(log.find("rank 1") != std::string::npos || log.find("rank: 1") != std::string::npos)
      << "the error does not name the rank:\n"
      << log;
#endif
}

TEST(PipelineCli, AHungRankEndsTheJobWithAnErrorAfterTheTimeout) {
  REQUIRE_MPI();
#ifdef TRELLIS_MPIEXEC
  if (!have_program("curl")) GTEST_SKIP() << "curl is not installed (scripts/install-deps.sh)";
  const std::string model = own_model("hang-test", 8);
  ASSERT_FALSE(model.empty());
  Server server(model, {"--pipeline", "--pipeline-timeout", "3", "--ctx", "4096"}, "pipeline-hang",
                mpirun(2));
  ASSERT_EQ(server.start(), "");
  HttpResult stream;
  std::thread client(
      [&] { stream = curl("POST", server.url("/v1/completions"), kLongStream, "--max-time 60"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const pid_t victim = rank_pid(model, 1);
  ASSERT_NE(victim, 0) << "no rank 1 process found";
  ASSERT_EQ(::kill(victim, SIGSTOP), 0);  // alive, silent
  const std::optional<int> code = server.process().wait_exit(std::chrono::seconds(40));
  client.join();
  EXPECT_FALSE(server.process().running()) << server.log();
  EXPECT_TRUE(!code.has_value() || *code != 0) << server.log();
  const std::string log = server.log();
  EXPECT_NE(log.find("pipeline stage on rank 1 did not"), std::string::npos) << log;
  // The client hears why its stream ended.
  EXPECT_NE(stream.body.find("pipeline stage on rank 1"), std::string::npos) << stream.body;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (const auto& [pid, rank] : processes_with(model)) {
    ::kill(pid, SIGKILL);  // never left behind, even when the test fails
    ADD_FAILURE() << "rank " << rank << " (pid " << pid << ") outlived the job";
  }
#endif
}

TEST(PipelineCli, EachRankHoldsItsShareOfTheWeights) {
  REQUIRE_MPI();
#ifdef TRELLIS_MPIEXEC
  const std::string model = testing::temp_dir() + "/small-f16.gguf";
  ASSERT_EQ(testing::run_cli("model synth --preset small --type f16 -o " + model).exit_code, 0);
  std::ifstream file(model, std::ios::binary | std::ios::ate);
  const auto file_bytes = static_cast<double>(file.tellg());
  const std::string bench =
      std::string(TRELLIS_CLI_PATH) + " bench speed -m " + model + " -p 16 -n 4 -r 1 -t 1 --json";
  const CommandResult alone = run_shell(bench + " 2>/dev/null");
  ASSERT_EQ(alone.exit_code, 0) << alone.output;
  const json whole = json::parse(alone.output, nullptr, false);
  ASSERT_FALSE(whole.is_discarded()) << alone.output;
  // One process touches every weight.
  const double alone_rss = whole["peak_rss_bytes"].get<double>();
  EXPECT_GT(alone_rss, 0.9 * file_bytes);
  const CommandResult split = run_shell(mpirun_command(2) + bench + " --pipeline 2>/dev/null");
  ASSERT_EQ(split.exit_code, 0) << split.output;
  const json j = json::parse(split.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << split.output;
  ASSERT_EQ(j["stages"].size(), 2u) << split.output;
  for (const json& stage : j["stages"]) {
    // Each rank leaves out about half the weights (a quarter of the file at least), whatever the
    // process's own overhead (the sanitizer build's is large).
    EXPECT_LT(stage["peak_rss_bytes"].get<double>(), alone_rss - 0.25 * file_bytes)
        << stage.dump() << "\none process: " << alone_rss;
    EXPECT_GT(stage["busy_s"].get<double>(), 0) << stage.dump();
  }
#endif
}

}  // namespace
}  // namespace trellis
