#include "bench/kv_type_bench.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "bench/requests.h"

namespace trellis::bench {
namespace {

// One type's outputs for every prompt.
struct TypeRun {
  std::vector<RequestOutput> outputs;
  size_t bytes_per_token = 0;
};

Result<TypeRun> run_type(const KvTypeBenchOptions& options, const KvTypes& types,
                         const Observer& observer, const std::string& stage) {
  EngineConfig config = options.engine;
  config.kv_types = types;
  config.prefix_cache.enabled = false;
  Result<std::unique_ptr<Engine>> created = Engine::create(options.model_path, config);
  if (!created.ok()) return Error{kv_types_name(types) + ": " + created.error().message};
  Engine& engine = **created;
  TypeRun run;
  run.bytes_per_token = engine.model().kv_layout(config.block_size, types).bytes_per_token();
  observer.report_progress(stage, 0, options.prompts.size());
  for (size_t i = 0; i < options.prompts.size(); ++i) {
    EngineRequest request = greedy_request(
        engine.tokenizer().encode(options.prompts[i], /*add_special=*/true, false), options.n_gen);
    request.return_prompt_logits = true;
    Result<RequestOutput> out = engine.run(std::move(request));
    if (!out.ok()) return out.error();
    TRELLIS_TRY(output_status(*out));
    run.outputs.push_back(std::move(out).value());
    observer.report_progress(stage, i + 1, options.prompts.size());
  }
  return run;
}

KvTypeRow compare(const KvTypeBenchOptions& options, const KvTypes& types, const TypeRun& run,
                  const TypeRun& baseline) {
  KvTypeRow row;
  row.types = types;
  row.bytes_per_token = run.bytes_per_token;
  row.pool_tokens = options.pool_bytes / static_cast<int64_t>(run.bytes_per_token);
  double sum_squares = 0;
  int64_t n_values = 0;
  for (size_t p = 0; p < run.outputs.size(); ++p) {
    const RequestOutput& got = run.outputs[p];
    const RequestOutput& want = baseline.outputs[p];
    for (size_t pos = 0; pos < want.prompt_logits.size(); ++pos) {
      const std::vector<float>& a = got.prompt_logits[pos];
      const std::vector<float>& b = want.prompt_logits[pos];
      for (size_t v = 0; v < b.size(); ++v) {
        const double d = static_cast<double>(a[v]) - static_cast<double>(b[v]);
        row.max_abs_error = std::max(row.max_abs_error, std::fabs(d));
        sum_squares += d * d;
      }
      n_values += static_cast<int64_t>(b.size());
      ++row.n_positions;
      row.n_top1_same += std::max_element(a.begin(), a.end()) - a.begin() ==
                         std::max_element(b.begin(), b.end()) - b.begin();
    }
    const size_t n = std::min(got.tokens.size(), want.tokens.size());
    size_t agreed = 0;
    while (agreed < n && got.tokens[agreed] == want.tokens[agreed]) ++agreed;
    row.n_greedy_agreed += static_cast<int64_t>(agreed);
    row.n_greedy += static_cast<int64_t>(want.tokens.size());
  }
  row.rms_error = n_values > 0 ? std::sqrt(sum_squares / static_cast<double>(n_values)) : 0.0;
  return row;
}

}  // namespace

Result<std::vector<KvTypeRow>> run_kv_type_bench(const KvTypeBenchOptions& options,
                                                 const Observer& observer) {
  if (options.prompts.empty() || options.types.empty())
    return Error{"kv-types: no prompts or no KV types"};
  if (options.n_gen < 1) return Error{"kv-types: -n must be at least 1"};
  if (options.pool_bytes <= 0) return Error{"kv-types: the pool size must be positive"};
  Result<TypeRun> baseline =
      run_type(options, options.baseline, observer, "baseline " + kv_types_name(options.baseline));
  if (!baseline.ok()) return baseline.error();
  std::vector<KvTypeRow> rows;
  for (const KvTypes& types : options.types) {
    Result<TypeRun> run = run_type(options, types, observer, kv_types_name(types));
    if (!run.ok()) return run.error();
    rows.push_back(compare(options, types, *run, *baseline));
  }
  return rows;
}

}  // namespace trellis::bench
