// Running shell commands, and the trellis binary itself, from the integration tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace trellis::testing {

struct CommandResult {
  int exit_code;       // -1 when the command could not run or did not exit normally
  std::string output;  // what the command wrote to stdout
};

// Runs `command` with /bin/sh and waits for it.
inline CommandResult run_shell(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) output.append(buf.data(), n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

#ifdef TRELLIS_CLI_PATH
// Runs `trellis ARGS`; the output is stdout and stderr together, or stdout alone (stderr
// dropped). `env` prefixes shell variable assignments ("PATH=/x ").
inline CommandResult run_cli(const std::string& args, bool with_stderr = true,
                             const std::string& env = "") {
  return run_shell(env + std::string(TRELLIS_CLI_PATH) + " " + args +
                   (with_stderr ? " 2>&1" : " 2>/dev/null"));
}
#endif

}  // namespace trellis::testing
