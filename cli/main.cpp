// The `trellis` command line: one binary, one subcommand per task.
#include <CLI/CLI.hpp>
#include <string>

#include "bench/results.h"
#include "commands.h"
#include "kernels/kernel_isa.h"

namespace {

// "trellis 0.1.0 (commit 0af72c3, g++ 12.2.0, kernels avx512)": what a bug report needs. The
// commit is the one the build was configured at.
std::string version_text() {
#if defined(__clang__)
  const std::string compiler = std::string("clang++ ") + __clang_version__;
#elif defined(__GNUC__)
  const std::string compiler = std::string("g++ ") + __VERSION__;
#else
  const std::string compiler = "an unknown compiler";
#endif
  return std::string("trellis ") + TRELLIS_VERSION + " (commit " + trellis::bench::source_commit() +
         ", " + compiler + ", kernels " +
         std::string(trellis::kernel_isa_name(trellis::best_kernel_isa())) + ")";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"trellis: LLM inference on the CPU you already own"};
  app.set_version_flag("--version", version_text);
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
