// The `trellis` command line: one binary, one subcommand per task.
#include <CLI/CLI.hpp>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"trellis: LLM inference on the CPU you already own"};
  app.set_version_flag("--version", "trellis 0.1.0");
  app.require_subcommand(1);
  int exit_code = 0;
  trellis::cli::add_demo_command(app, exit_code);
  trellis::cli::add_generate_command(app, exit_code);
  trellis::cli::add_logits_command(app, exit_code);
  trellis::cli::add_model_commands(app, exit_code);
  trellis::cli::add_bench_commands(app, exit_code);
  trellis::cli::add_serve_command(app, exit_code);
  trellis::cli::add_route_command(app, exit_code);
  trellis::cli::add_tokenize_commands(app, exit_code);
  trellis::cli::add_embed_command(app, exit_code);
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
