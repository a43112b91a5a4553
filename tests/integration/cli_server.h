// `trellis serve` (or any long-running trellis command) as a child process on loopback, and the
// clients the tests drive it with: curl with bounded waits, SSE parsing, the `openai` npm client's
// folder. Every wait is bounded; every child is killed when its owner goes (and with the test
// process, through PR_SET_PDEATHSIG).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_runner.h"
#include "test_support.h"

namespace trellis::testing::cli_server {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr auto kStartDeadline = std::chrono::seconds(30);
constexpr auto kExitDeadline = std::chrono::seconds(20);
constexpr int kCurlMaxSeconds = 30;

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Wraps a string in single quotes for /bin/sh.
inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

inline bool have_program(const std::string& name) {
  return run_shell("command -v " + name + " >/dev/null 2>&1").exit_code == 0;
}

// A child process started with fork/exec, stdout and stderr both written to `log_path`. The
// destructor kills it (SIGKILL) and reaps it when it still runs.
class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& argv, std::string log_path)
      : log_path_(std::move(log_path)) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    // Emptied here, not only in the child: a reader that polls the log right after the fork
    // must not find an earlier process's lines there (its port, its "ready").
    ::close(::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644));
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      // Dies with the test process even if that one crashes before its teardown.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      const int fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, STDOUT_FILENO);
        ::dup2(fd, STDERR_FILENO);
        ::close(fd);
      }
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() {
    if (running()) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }
  std::string log() const { return read_file(log_path_); }

  // True while the child has not exited (reaps it when it has).
  bool running() {
    if (pid_ <= 0 || exited_) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      status_ = status;
      return false;
    }
    return true;
  }

  // The exit code after a bounded wait; nullopt if it was still running at the deadline or died
  // from a signal.
  std::optional<int> wait_exit(std::chrono::milliseconds deadline) {
    const auto until = Clock::now() + deadline;
    while (running() && Clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!exited_ || !WIFEXITED(status_)) return std::nullopt;
    return WEXITSTATUS(status_);
  }

  bool send_signal(int signal) { return running() && ::kill(pid_, signal) == 0; }

 private:
  std::string log_path_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
};

struct HttpResult {
  int status = 0;  // 0: no answer (curl failed)
  std::string body;
  json json_body() const { return json::parse(body, nullptr, /*allow_exceptions=*/false); }
};

// One HTTP request with curl, bounded by --max-time. `body` travels through a file, so no quoting
// of JSON is needed. `extra` is added to the curl command line as is (already quoted).
inline HttpResult curl(const std::string& method, const std::string& url,
                       const std::string& body = "", const std::string& extra = "") {
  static int counter = 0;
  std::string command = "curl -sS -N --max-time " + std::to_string(kCurlMaxSeconds) + " -X " +
                        method + " -w '\\n%{http_code}' " + extra + " ";
  if (!body.empty()) {
    const std::string body_path =
        testing::temp_dir() + "/body-" + std::to_string(++counter) + ".json";
    std::ofstream(body_path, std::ios::binary) << body;
    command += "-H 'Content-Type: application/json' --data-binary @" + body_path + " ";
  }
  command += shell_quote(url) + " 2>/dev/null";
  CommandResult run = run_shell(command);
  HttpResult result;
  const size_t last_newline = run.output.rfind('\n');
  if (last_newline == std::string::npos) return result;
  result.status = std::atoi(run.output.c_str() + last_newline + 1);
  result.body = run.output.substr(0, last_newline);
  return result;
}

// The `data: ` payloads of an SSE body, in order; `well_formed` is false when a non-empty line
// is not a data line.
struct SseEvents {
  std::vector<std::string> data;
  bool well_formed = true;
};
inline SseEvents parse_sse(const std::string& body) {
  SseEvents events;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line.rfind("data: ", 0) != 0) {
      events.well_formed = false;
      continue;
    }
    events.data.push_back(line.substr(6));
  }
  return events;
}

// `trellis serve` on a free port with the tiny model. start() waits (bounded) for the
// `listening on` line and then for /health to answer 200.
class Server {
 public:
  // `launcher` comes before the trellis binary (say mpirun -np 2): the command line then starts
  // the server through it.
  Server(const std::string& model, std::vector<std::string> extra_args, const std::string& name,
         std::vector<std::string> launcher = {}) {
    std::vector<std::string> argv = std::move(launcher);
    const std::vector<std::string> serve = {
        TRELLIS_CLI_PATH,  "serve",  "--port", "0", "-m",           model,
        "--chat-template", "chatml", "-t",     "1", "--model-name", "tiny"};
    argv.insert(argv.end(), serve.begin(), serve.end());
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    process_ = std::make_unique<ChildProcess>(argv, testing::temp_dir() + "/" + name + ".log");
  }
  // Any command that prints `<marker>HOST:PORT (` when it listens (`trellis route`).
  static std::unique_ptr<Server> command(const std::vector<std::string>& argv,
                                         const std::string& name, const std::string& marker) {
    std::unique_ptr<Server> server(new Server());
    server->marker_ = marker;
    server->process_ =
        std::make_unique<ChildProcess>(argv, testing::temp_dir() + "/" + name + ".log");
    return server;
  }

  // Empty on success, else what went wrong (with the log).
  std::string start() {
    const auto until = Clock::now() + kStartDeadline;
    const std::string& marker = marker_;
    while (port_ == 0) {
      const std::string log = process_->log();
      const size_t at = log.find(marker);
      if (at != std::string::npos) {
        const size_t colon = log.find(':', at + marker.size());
        const size_t paren = log.find(" (", at);
        if (colon != std::string::npos && paren != std::string::npos && colon < paren) {
          host_ = log.substr(at + marker.size(), colon - at - marker.size());
          port_ = std::atoi(log.substr(colon + 1, paren - colon - 1).c_str());
        }
      }
      if (port_ != 0) break;
      if (!process_->running()) return "the server exited before listening:\n" + log;
      if (Clock::now() > until) return "no `listening on` line in time:\n" + log;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    while (curl("GET", url("/health"), "", "--max-time 2").status != 200) {
      if (!process_->running()) return "the server exited before /health was ready:\n" + log();
      if (Clock::now() > until) return "/health did not answer 200 in time:\n" + log();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return "";
  }

  std::string url(const std::string& path) const {
    return "http://" + host_ + ":" + std::to_string(port_) + path;
  }
  int port() const { return port_; }
  std::string log() const { return process_->log(); }
  ChildProcess& process() { return *process_; }

 private:
  Server() = default;

  std::unique_ptr<ChildProcess> process_;
  std::string marker_ = "listening on http://";
  std::string host_;
  int port_ = 0;
};

// Skips the test where curl is missing.
#define REQUIRE_CURL() \
  if (!have_program("curl")) GTEST_SKIP() << "curl is not installed (scripts/install-deps.sh)"

inline std::string synth_tiny_model() {
  const std::string path = testing::temp_dir() + "/server-tiny.gguf";
  if (fs::exists(path)) return path;
  const CommandResult synth =
      run_shell(std::string(TRELLIS_CLI_PATH) +
                " model synth --preset tiny --type q8_0 --seed 5 -o " + path + " 2>&1");
  return synth.exit_code == 0 ? path : "";
}

// A fresh `trellis serve` on the tiny model with `args`, started; `error` says what went wrong.
inline std::unique_ptr<Server> start_server(const std::vector<std::string>& args,
                                            const std::string& name, std::string& error) {
  const std::string model = synth_tiny_model();
  if (model.empty()) {
    error = "model synth failed";
    return nullptr;
  }
  auto server = std::make_unique<Server>(model, args, name);
  error = server->start();
  return server;
}

// The node_modules folder holding every one of `packages`: $TRELLIS_NODE_MODULES, else
// <build>/node/node_modules beside the CLI binary's build tree, else build/node/node_modules in
// the source tree; "" if none does.
inline std::string node_modules_with(std::initializer_list<const char*> packages) {
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("TRELLIS_NODE_MODULES")) candidates.emplace_back(env);
  const fs::path cli(TRELLIS_CLI_PATH);  // <build>/cli/trellis
  candidates.push_back(cli.parent_path().parent_path() / "node" / "node_modules");
  const fs::path source_root = fs::path(__FILE__).parent_path().parent_path().parent_path();
  candidates.push_back(source_root / "build" / "node" / "node_modules");
  for (const fs::path& dir : candidates) {
    bool all = true;
    for (const char* name : packages) all = all && fs::exists(dir / name / "package.json");
    if (all) return fs::absolute(dir).string();
  }
  return "";
}

// The node_modules folder holding `openai` (see node_modules_with).
inline std::string openai_node_modules() {
  return node_modules_with({"openai"});
}

// Why the `openai` npm client cannot run here, or empty.
inline std::string openai_client_unavailable() {
  if (!have_program("node"))
    return "node is not installed (scripts/install-deps.sh installs nodejs and npm)";
  if (openai_node_modules().empty())
    return "the openai npm package is absent: run scripts/setup-node-client.sh <build>/node (or "
           "set TRELLIS_NODE_MODULES to its node_modules folder)";
  return "";
}

// Runs tests/node/openai_client_check.mjs (the official `openai` client, from `modules`) against
// `base_url` (…/v1) with API key `key`, bounded by `timeout`.
inline CommandResult run_openai_client_check(const std::string& modules,
                                             const std::string& base_url, const std::string& key) {
  const fs::path script =
      fs::path(__FILE__).parent_path().parent_path() / "node" / "openai_client_check.mjs";
  if (!fs::exists(script)) return {-1, "missing " + script.string()};
  return run_shell("TRELLIS_NODE_MODULES=" + shell_quote(modules) + " NODE_PATH=" +
                   shell_quote(modules) + " timeout 60 node " + shell_quote(script.string()) + " " +
                   shell_quote(base_url) + " tiny " + shell_quote(key) + " 2>&1");
}

// The script's summary (the JSON object it prints last) says every check passed.
inline void expect_openai_client_passed(const CommandResult& run) {
  const size_t brace = run.output.find('{');
  json summary =
      json::parse(brace == std::string::npos ? "" : run.output.substr(brace), nullptr, false);
  ASSERT_FALSE(summary.is_discarded()) << run.output;
  EXPECT_EQ(summary["ok"], true) << run.output;
  EXPECT_EQ(summary["passed"], 7) << run.output;
}

}  // namespace trellis::testing::cli_server
