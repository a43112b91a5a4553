// The `trellis` command line: one binary, one subcommand per task.
#include <CLI/CLI.hpp>

int main(int argc, char** argv) {
  CLI::App app{"trellis: LLM inference on the CPU you already own"};
  app.set_version_flag("--version", "trellis 0.1.0");
  app.require_subcommand(1);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
