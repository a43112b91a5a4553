// `trellis bench router`: flags, then bench/router_bench.h's multi-tenant chat sessions through
// the router under each policy and through one replica alone, printed as a table and saved as
// results.json / results.csv.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "bench/router_bench.h"
#include "bench_common.h"
#include "commands.h"
#include "engine_options.h"

namespace trellis::cli {
namespace {

using nlohmann::json;

// Each replica's KV pool when none is given: small enough that one replica cannot keep every
// group's conversations, which is where routing matters.
constexpr int64_t kDefaultKvTokensPerReplica = 4096;

struct RouterBenchArgs {
  EngineOptions engine;
  bench::RouterBenchOptions options;
  std::string policies = "cache-aware,round-robin,least-load";
  bool no_single = false;
  bool json_output = false;
  std::string out;
};

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ','))
    if (!part.empty()) parts.push_back(part);
  return parts;
}

// "a/b/c" of a JSON array of numbers, each printed with `format`.
std::string slash_list(const json& values, const char* format) {
  std::string text;
  char item[32];
  for (const json& v : values) {
    std::snprintf(item, sizeof(item), format, v.get<double>());
    text += (text.empty() ? "" : "/") + std::string(item);
  }
  return text;
}

void print_table(const bench::RouterBenchOptions& o, const json& rows) {
  std::printf(
      "bench router: %d groups x %d sessions x %d turns, system prompt ~%d tokens, user ~%d, "
      "D=%d, %d replicas x %d threads, model %s\n",
      o.groups, o.sessions, o.turns, o.system_len, o.user_len, o.decode_len, o.replicas,
      o.engine.n_threads, o.model_path.c_str());
  std::printf(
      "| run | replicas | requests/s | gen tokens/s | hit rate | TTFT p50 | latency p50 | p99 per "
      "group (ms) | requests per replica |\n|---|---|---|---|---|---|---|---|---|\n");
  for (const json& r : rows) {
    std::printf("| %s | %d | %.3f | %.2f | %.1f%% | %.0f ms | %.0f ms | %s | %s |\n",
                r["run"].get<std::string>().c_str(), r["replicas"].get<int>(),
                r["requests_per_s"].get<double>(), r["generation_tokens_per_s"].get<double>(),
                100.0 * r["hit_rate"].get<double>(), r["ttft_ms_p50"].get<double>(),
                r["latency_ms_p50"].get<double>(),
                slash_list(r["group_latency_ms_p99"], "%.0f").c_str(),
                slash_list(r["requests_per_replica"], "%.0f").c_str());
  }
}

int run_bench_router(RouterBenchArgs& args) {
  bench::RouterBenchOptions& options = args.options;
  if (args.engine.threads == 0) args.engine.threads = 1;  // one core per replica
  if (!resolve_engine(args.engine, options.model_path, options.engine)) return 1;
  if (options.engine.kv_bytes == 0 && options.engine.kv_tokens == 0)
    options.engine.kv_tokens = kDefaultKvTokensPerReplica;
  options.policies = split_commas(args.policies);
  options.single = !args.no_single;

  ProgressPrinter progress;
  Result<json> record = bench::run_router_bench(options, progress.observer());
  if (!record.ok()) return print_error(record.error().message);
  if (!save_results(args.out, "router", *record, bench::router_results_table(*record)).ok())
    return 1;
  if (args.json_output) {
    std::printf("%s\n", record->dump().c_str());
  } else {
    print_table(options, (*record)["runs"]);
  }
  return 0;
}

}  // namespace

void add_bench_router_command(CLI::App& bench, int& exit_code) {
  CLI::App* cmd = bench.add_subcommand(
      "router", "Multi-tenant chat sessions through the router under each policy, and one replica");
  auto args = std::make_shared<RouterBenchArgs>();
  args->engine.add_to(*cmd, /*model_required=*/false);
  args->engine.add_scheduler_options(*cmd);
  bench::RouterBenchOptions& o = args->options;
  cmd->add_option("--replicas", o.replicas, "Replicas behind the router")->capture_default_str();
  cmd->add_option("--groups", o.groups, "Groups of sessions; a group shares its system prompt")
      ->capture_default_str();
  cmd->add_option("--sessions", o.sessions, "Sessions per group, all at once")
      ->capture_default_str();
  cmd->add_option("--turns", o.turns, "Turns per session, one after another")
      ->capture_default_str();
  cmd->add_option("--system-len", o.system_len, "Each group's system prompt, in tokens of text")
      ->capture_default_str();
  cmd->add_option("--user-len", o.user_len, "Each user message, in tokens of text")
      ->capture_default_str();
  cmd->add_option("-D", o.decode_len, "Tokens generated per turn")->capture_default_str();
  cmd->add_option("--policies", args->policies, "Policies to run, comma-separated")
      ->capture_default_str();
  cmd->add_flag("--no-single", args->no_single, "Skip the one-replica run");
  cmd->add_option("--chat-template", o.chat_template, "Chat format when the model has none")
      ->capture_default_str();
  cmd->add_flag("--json", args->json_output, "Print one JSON object");
  cmd->add_option("--out", args->out,
                  "Folder for results.json and results.csv (default bench-results/router-...)");
  cmd->callback([&exit_code, args] { exit_code = run_bench_router(*args); });
}

}  // namespace trellis::cli
