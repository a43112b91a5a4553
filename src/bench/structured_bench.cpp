#include "bench/structured_bench.h"

namespace trellis::bench {

namespace structured_bench_detail {
namespace {

using nlohmann::json;

Result<CompileBenchResult> run_compile_part(const StructuredOptions& options,
                                            StructuredResult& result, const Observer& observer) {
  std::vector<NamedSchema> suite;
  if (options.schema_suite_dir.empty()) {
    result.notes.push_back(
        "compile: no JSON-Schema-Test-Suite folder (apt-get install json-schema-test-suite, or "
        "--schema-suite DIR): the bench's own schemas only");
  } else {
    Result<std::vector<NamedSchema>> loaded = load_schema_suite(options.schema_suite_dir);
    if (!loaded.ok()) return loaded.error();
    suite = std::move(loaded).value();
    result.schema_suite_dir = options.schema_suite_dir;
  }
  return run_compile_bench(options.compile, structured_bench_schemas(), suite, observer);
}

json mask_times_json(const MaskTimes& t) {
  return {{"requests", t.n_requests},
          {"final", t.n_final},
          {"stuck", t.n_stuck},
          {"steps", t.n_steps},
          {"computed", t.n_computed},
          {"hits", t.n_hits},
          {"mean_ms", t.mean_ms},
          {"p50_ms", t.p50_ms},
          {"p99_ms", t.p99_ms},
          {"max_ms", t.max_ms},
          {"apply_mean_ms", t.apply_mean_ms},
          {"meets_targets", meets_mask_targets(t)}};
}

json masks_json(const MaskBenchResult& masks) {
  json vocabs = json::array();
  for (const VocabFacts& v : masks.vocabs) {
    vocabs.push_back({{"path", v.path},
                      {"tokens", v.n_tokens},
                      {"trie_nodes", v.n_trie_nodes},
                      {"trie_build_ms", v.trie_build_ms}});
  }
  json rows = json::array();
  for (const MaskRow& r : masks.rows) {
    rows.push_back({{"vocab", r.vocab},
                    {"schema", r.schema},
                    {"automaton_states", r.n_states},
                    {"cold", mask_times_json(r.cold)},
                    {"warm", mask_times_json(r.warm)}});
  }
  return {{"target_mean_ms", kMaskMeanTargetMs},
          {"target_p99_ms", kMaskP99TargetMs},
          {"vocabs", vocabs},
          {"rows", rows}};
}

json compile_json(const CompileBenchResult& c, const std::string& suite_dir) {
  json own = json::array();
  for (const CompileTime& t : c.own) own.push_back({{"schema", t.name}, {"ms", t.ms}});
  json refusals = json::array();
  for (const auto& [reason, count] : c.refusals)
    refusals.push_back({{"reason", reason}, {"count", count}});
  return {{"suite_dir", suite_dir}, {"schemas", c.n_schemas},       {"compiled", c.n_compiled},
          {"refused", c.n_refused}, {"median_ms", c.median_ms},     {"p90_ms", c.p90_ms},
          {"worst_ms", c.worst.ms}, {"worst_schema", c.worst.name}, {"own", own},
          {"refusals", refusals}};
}

json mode_json(const DecodeModeStats& m) {
  return {{"tokens_per_s", m.tokens_per_s.mean},    {"tokens_per_s_stddev", m.tokens_per_s.stddev},
          {"request_ms", m.request_ms.mean},        {"request_ms_stddev", m.request_ms.stddev},
          {"generated_tokens", m.generated_tokens}, {"forced_tokens", m.forced_tokens},
          {"engine_steps", m.engine_steps}};
}

json decode_json(const DecodeBenchResult& d) {
  json batches = json::array();
  for (const DecodeBatchResult& b : d.batches) {
    batches.push_back({{"batch_size", b.batch_size},
                       {"free", mode_json(b.free_text)},
                       {"constrained", mode_json(b.constrained)},
                       {"jump_forward", mode_json(b.jump_forward)},
                       {"free_jump_lengths", mode_json(b.free_jump_lengths)},
                       {"constrained_speed_ratio", b.constrained_speed_ratio},
                       {"jump_forward_time_ratio", b.jump_forward_time_ratio},
                       {"jump_forward_free_ratio", b.jump_forward_free_ratio}});
  }
  return {{"threads", d.n_threads},
          {"vocab", d.n_vocab},
          {"prompt_tokens", d.prompt_tokens},
          {"lengths", d.lengths},
          {"jump_forward_lengths", d.jump_forward_lengths},
          {"complete", d.n_complete},
          {"valid_json", d.n_valid_json},
          {"sample_output", d.sample_output},
          {"batches", batches}};
}

// One CSV row per number (or boolean) field of `object`.
void add_rows(CsvTable& table, const std::string& part, const std::string& subject,
              const json& object) {
  for (const auto& [key, value] : object.items()) {
    if (value.is_number() || value.is_boolean())
      table.rows.push_back({part, subject, key, value.dump()});
  }
}

}  // namespace
}  // namespace structured_bench_detail

Result<StructuredResult> run_structured_bench(const StructuredOptions& options,
                                              const Observer& observer) {
  namespace d = structured_bench_detail;
  StructuredResult result;
  if (options.run_masks && options.masks.vocab_paths.empty()) {
    result.notes.push_back("masks: no vocabulary file (give --vocab FILE): skipped");
  } else if (options.run_masks) {
    Result<MaskBenchResult> masks =
        run_mask_bench(options.masks, structured_bench_schemas(), observer);
    if (!masks.ok()) return masks.error();
    result.masks = std::move(masks).value();
  }
  if (options.run_compile) {
    Result<CompileBenchResult> compile = d::run_compile_part(options, result, observer);
    if (!compile.ok()) return compile.error();
    result.compile = std::move(compile).value();
  }
  if (options.run_decode) {
    Result<DecodeBenchResult> decode = run_decode_bench(options.decode, observer);
    if (!decode.ok()) return decode.error();
    result.decode = std::move(decode).value();
  }
  return result;
}

nlohmann::json structured_config_json(const StructuredOptions& options) {
  return {{"parts",
           {{"masks", options.run_masks},
            {"compile", options.run_compile},
            {"decode", options.run_decode}}},
          {"mask_requests", options.masks.n_requests},
          {"mask_max_tokens", options.masks.max_tokens},
          {"mask_seed", options.masks.seed},
          {"longest_share", options.masks.longest_share},
          {"vocabs", options.masks.vocab_paths},
          {"schema_suite_dir", options.schema_suite_dir},
          {"compile_reps", options.compile.reps},
          {"batch_sizes", options.decode.batch_sizes},
          {"max_tokens", options.decode.max_tokens},
          {"repeats", options.decode.repeats},
          {"prompt", options.decode.prompt}};
}

nlohmann::json structured_result_json(const StructuredResult& result) {
  namespace d = structured_bench_detail;
  nlohmann::json out = {{"notes", result.notes}};
  if (result.masks) out["masks"] = d::masks_json(*result.masks);
  if (result.compile) out["compile"] = d::compile_json(*result.compile, result.schema_suite_dir);
  if (result.decode) out["decode"] = d::decode_json(*result.decode);
  return out;
}

CsvTable structured_csv(const nlohmann::json& results) {
  namespace d = structured_bench_detail;
  CsvTable table{{"part", "subject", "metric", "value"}, {}};
  if (results.contains("masks")) {
    for (const nlohmann::json& r : results["masks"]["rows"]) {
      const std::string subject =
          r["vocab"].get<std::string>() + "/" + r["schema"].get<std::string>();
      d::add_rows(table, "masks", subject + "/cold", r["cold"]);
      d::add_rows(table, "masks", subject + "/warm", r["warm"]);
    }
  }
  if (results.contains("compile")) {
    const nlohmann::json& c = results["compile"];
    d::add_rows(table, "compile", "all", c);
    for (const nlohmann::json& t : c["own"])
      d::add_rows(table, "compile", t["schema"].get<std::string>(), t);
  }
  if (results.contains("decode")) {
    for (const nlohmann::json& b : results["decode"]["batches"]) {
      const std::string subject = "B=" + b["batch_size"].dump();
      d::add_rows(table, "decode", subject, b);
      for (const char* mode : {"free", "constrained", "jump_forward", "free_jump_lengths"})
        d::add_rows(table, "decode", subject + "/" + mode, b[mode]);
    }
  }
  return table;
}

}  // namespace trellis::bench
