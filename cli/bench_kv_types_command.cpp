// `trellis bench kv-types`: each KV type against a baseline type on the same prompts (logit error,
// top-token and greedy agreement) and the room it gives (measured by bench/kv_type_bench.h).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "bench/kv_type_bench.h"
#include "bench_common.h"
#include "commands.h"
#include "engine_options.h"

namespace trellis::cli {
namespace {

// Story openings and everyday text: what the small trained models know.
const std::vector<std::string> kDefaultPrompts = {
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.",
    "Tom had a big red ball. One day he took it to the beach with his dog, Max.",
    "The sun was shining and the birds were singing. Sam wanted to build a tall tower of blocks.",
    "In a small town there lived an old man who fixed clocks. Every morning he opened his shop",
};

struct KvTypesArgs {
  EngineOptions engine;
  bench::KvTypeBenchOptions options;
  std::vector<std::string> prompts;
  std::vector<std::string> types = {"q8_0", "q4_0"};
  std::string baseline = "f16";
  std::string pool = "256MiB";
  bool json = false;
};

// "q8_0" (keys and values) or "q8_0/f16" (keys / values).
Result<KvTypes> parse_types(const std::string& text) {
  const size_t slash = text.find('/');
  KvTypes types;
  const std::string key = text.substr(0, slash);
  const std::string value = slash == std::string::npos ? key : text.substr(slash + 1);
  if (!parse_kv_type(key, &types.key) || !parse_kv_type(value, &types.value))
    return Error{"'" + text + "' is not a KV type (f16, q8_0, q4_0, f32, or K/V such as q8_0/f16)"};
  return types;
}

int run_kv_types(KvTypesArgs& args) {
  bench::KvTypeBenchOptions& options = args.options;
  if (!resolve_engine(args.engine, options.model_path, options.engine)) return 1;
  options.prompts = args.prompts.empty() ? kDefaultPrompts : args.prompts;
  for (const std::string& t : args.types) {
    Result<KvTypes> types = parse_types(t);
    if (!types.ok()) return print_error("--types: " + types.error().message);
    options.types.push_back(*types);
  }
  Result<KvTypes> baseline = parse_types(args.baseline);
  if (!baseline.ok()) return print_error("--baseline: " + baseline.error().message);
  options.baseline = *baseline;
  Result<int64_t> pool = parse_byte_size(args.pool);
  if (!pool.ok()) return print_error("--pool: " + pool.error().message);
  options.pool_bytes = *pool;
  ProgressPrinter progress;
  Result<std::vector<bench::KvTypeRow>> rows =
      bench::run_kv_type_bench(options, progress.observer());
  if (!rows.ok()) return print_error(rows.error().message);
  if (args.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const bench::KvTypeRow& r : *rows) {
      out.push_back({{"kv_type_k", kv_type_name(r.types.key)},
                     {"kv_type_v", kv_type_name(r.types.value)},
                     {"baseline", kv_types_name(options.baseline)},
                     {"bytes_per_token", r.bytes_per_token},
                     {"pool_tokens", r.pool_tokens},
                     {"max_abs_logit_error", r.max_abs_error},
                     {"rms_logit_error", r.rms_error},
                     {"positions", r.n_positions},
                     {"top1_same", r.n_top1_same},
                     {"greedy_agreed", r.n_greedy_agreed},
                     {"greedy_tokens", r.n_greedy}});
    }
    std::printf("%s\n",
                nlohmann::json{{"model", options.model_path}, {"rows", out}}.dump().c_str());
    return 0;
  }
  std::printf("against %s KV, %zu prompts, %d generated tokens each\n",
              kv_types_name(options.baseline).c_str(), options.prompts.size(), options.n_gen);
  std::printf(
      "| KV | bytes/token | tokens in %s | max |dlogit| | rms dlogit | top-1 same | greedy "
      "agreed |\n|---|---|---|---|---|---|---|\n",
      args.pool.c_str());
  for (const bench::KvTypeRow& r : *rows) {
    std::printf("| %s | %zu | %lld | %.4f | %.5f | %lld/%lld | %lld/%lld |\n",
                kv_types_name(r.types).c_str(), r.bytes_per_token,
                static_cast<long long>(r.pool_tokens), r.max_abs_error, r.rms_error,
                static_cast<long long>(r.n_top1_same), static_cast<long long>(r.n_positions),
                static_cast<long long>(r.n_greedy_agreed), static_cast<long long>(r.n_greedy));
  }
  return 0;
}

}  // namespace

void add_bench_kv_types_command(CLI::App& bench, int& exit_code) {
  CLI::App* cmd = bench.add_subcommand(
      "kv-types", "Logit error, greedy agreement and room of each KV type against a baseline");
  auto args = std::make_shared<KvTypesArgs>();
  args->engine.add_to(*cmd, /*model_required=*/false);
  cmd->add_option("-p,--prompt", args->prompts, "A prompt (repeatable); default: four stories");
  cmd->add_option("-n,--n-gen", args->options.n_gen, "Greedy tokens per prompt")
      ->capture_default_str();
  cmd->add_option("--types", args->types, "The KV types compared (K/V as q8_0/f16)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--baseline", args->baseline, "The KV type compared against")
      ->capture_default_str();
  cmd->add_option("--pool", args->pool, "The pool size whose token capacity is reported")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->callback([&exit_code, args] { exit_code = run_kv_types(*args); });
}

}  // namespace trellis::cli
