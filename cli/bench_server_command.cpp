// `trellis bench server`: flags, then bench/server_bench.h's concurrent HTTP chat clients against
// a fresh server with the cache off and on, printed as a table and saved as results.json /
// results.csv.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/server_bench.h"
#include "bench_common.h"
#include "commands.h"
#include "engine_options.h"

namespace trellis::cli {
namespace {

using nlohmann::json;

struct ServerBenchArgs {
  EngineOptions engine;
  bench::ServerBenchOptions options;  // the load; model and engine are set at run
  bool json_output = false;
  std::string out;
};

void print_table(const bench::ServerBenchOptions& o, const json& rows) {
  std::printf(
      "bench server: %d chat clients x %d streaming requests, system prompt ~%d tokens, "
      "user ~%d, D=%d, model %s\n",
      o.clients, o.requests, o.system_len, o.user_len, o.decode_len, o.model_path.c_str());
  std::printf(
      "| run | requests/s | TTFT p50 | TTFT p99 | latency p50 | latency p99 | cached / "
      "prompt tokens | gen tokens/s |\n|---|---|---|---|---|---|---|---|\n");
  for (const json& r : rows) {
    std::printf("| %s | %.3f | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %lld / %lld | %.2f |\n",
                r["run"].get<std::string>().c_str(), r["requests_per_s"].get<double>(),
                r["ttft_ms_p50"].get<double>(), r["ttft_ms_p99"].get<double>(),
                r["latency_ms_p50"].get<double>(), r["latency_ms_p99"].get<double>(),
                r["cached_tokens"].get<long long>(), r["prompt_tokens"].get<long long>(),
                r["generation_tokens_per_s"].get<double>());
  }
}

int run_bench_server(ServerBenchArgs& args) {
  bench::ServerBenchOptions& options = args.options;
  if (!resolve_engine(args.engine, options.model_path, options.engine)) return 1;

  ProgressPrinter progress;
  Result<json> record = bench::run_server_bench(options, progress.observer());
  if (!record.ok()) return print_error(record.error().message);
  if (!save_results(args.out, "server", *record, bench::server_results_table(*record)).ok())
    return 1;
  const bool identical = (*record)["outputs_identical"].get<bool>();
  if (args.json_output) {
    std::printf("%s\n", record->dump().c_str());
  } else {
    print_table(options, (*record)["runs"]);
    std::printf("outputs: %s\n", identical ? "identical" : "DIFFERENT");
  }
  if (!identical) return print_error("the texts differ between cache off and on");
  return 0;
}

}  // namespace

void add_bench_server_command(CLI::App& bench, int& exit_code) {
  CLI::App* cmd = bench.add_subcommand(
      "server", "Concurrent chat clients over HTTP sharing a system prompt: cache off vs on");
  auto args = std::make_shared<ServerBenchArgs>();
  args->engine.add_to(*cmd, /*model_required=*/false);
  args->engine.add_scheduler_options(*cmd);
  cmd->add_option("--clients", args->options.clients, "Concurrent clients")->capture_default_str();
  cmd->add_option("--requests", args->options.requests, "Requests per client, one after another")
      ->capture_default_str();
  cmd->add_option("--system-len", args->options.system_len,
                  "Shared system prompt, in tokens of text")
      ->capture_default_str();
  cmd->add_option("--user-len", args->options.user_len, "Each user message, in tokens of text")
      ->capture_default_str();
  cmd->add_option("-D", args->options.decode_len, "Tokens generated per request")
      ->capture_default_str();
  cmd->add_option("--chat-template", args->options.chat_template,
                  "Chat format when the model has none")
      ->capture_default_str();
  cmd->add_flag("--json", args->json_output, "Print one JSON object");
  cmd->add_option("--out", args->out,
                  "Folder for results.json and results.csv (default bench-results/server-...)");
  cmd->callback([&exit_code, args] { exit_code = run_bench_server(*args); });
}

}  // namespace trellis::cli
