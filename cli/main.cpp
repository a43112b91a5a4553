// The `trellis` command line: one binary, one subcommand per task.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench/results.h"
#include "commands.h"
#include "config_file.h"
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

// The one-letter flags of `subcommand` and their long names ("m" -> "model").
std::map<std::string, std::string> long_names(const CLI::App& app, const std::string& subcommand) {
  std::map<std::string, std::string> names;
  for (const CLI::Option* option : app.get_subcommand(subcommand)->get_options()) {
    if (option->get_lnames().empty()) continue;
    for (const std::string& letter : option->get_snames()) names[letter] = option->get_lnames()[0];
  }
  return names;
}

}  // namespace

using trellis::Result;

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
  Result<std::vector<std::string>> args = trellis::cli::expand_config_file(
      std::vector<std::string>(argv + 1, argv + argc), "serve", long_names(app, "serve"));
  if (!args.ok()) {
    std::fprintf(stderr, "error: %s\n", args.error().message.c_str());
    return 1;
  }
  std::reverse(args->begin(), args->end());  // CLI11 takes the arguments last first
  try {
    app.parse(*args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
