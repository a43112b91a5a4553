// `trellis bench structured` on tiny inputs (the tiny test model, its vocabulary, a two-file
// schema suite): every figure is there and the counts agree with each other. Times are never
// compared with values, only with each other where an order always holds (p50 <= p99 <= max).
#include "bench/structured_bench.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "bench/results.h"
#include "bench/structured_report.h"
#include "test_support.h"

namespace trellis::bench {
namespace {

namespace fs = std::filesystem;

// A suite folder: a.json with a schema that compiles and one the subset refuses, and
// sub/b.json with one more that compiles.
std::string write_suite() {
  const fs::path dir = fs::path(testing::temp_dir()) / "suite";
  fs::create_directories(dir / "sub");
  std::ofstream(dir / "a.json") << R"([
    {"description": "ok", "schema": {"type": "integer", "minimum": 3}, "tests": []},
    {"description": "refused", "schema": {"type": "object", "minProperties": 2}, "tests": []}
  ])";
  std::ofstream(dir / "sub" / "b.json")
      << R"([{"description": "ok", "schema": {"enum": ["x", "y"]}, "tests": []}])";
  return dir.string();
}

void expect_times_ordered(const MaskTimes& t, const std::string& what) {
  EXPECT_EQ(t.n_computed + t.n_hits, t.n_steps) << what;
  EXPECT_LE(t.n_final + t.n_stuck, t.n_requests) << what;
  EXPECT_LE(t.p50_ms, t.p99_ms) << what;
  EXPECT_LE(t.p99_ms, t.max_ms) << what;
  EXPECT_LE(t.mean_ms, t.max_ms) << what;
  EXPECT_GE(t.p50_ms, 0.0) << what;
}

TEST(StructuredSchemasTest, OwnSchemasCompile) {
  const std::vector<NamedSchema>& schemas = structured_bench_schemas();
  ASSERT_EQ(schemas.size(), 3u);
  EXPECT_EQ(&person_schema(), &schemas[0]);
  for (const NamedSchema& s : schemas) {
    Result<Grammar> grammar = compile_json_schema(s.schema);
    EXPECT_TRUE(grammar.ok()) << s.name << ": " << grammar.error().message;
  }
}

TEST(StructuredSchemasTest, LoadsEverySuiteSchemaInPathOrder) {
  Result<std::vector<NamedSchema>> suite = load_schema_suite(write_suite());
  ASSERT_TRUE(suite.ok()) << suite.error().message;
  ASSERT_EQ(suite->size(), 3u);
  EXPECT_EQ((*suite)[0].name, "a.json#0");
  EXPECT_EQ((*suite)[1].name, "a.json#1");
  EXPECT_EQ((*suite)[2].name, "sub/b.json#0");
  EXPECT_FALSE(load_schema_suite(testing::temp_dir() + "/no-such-folder").ok());
}

TEST(StructuredCompileTest, CountsAndRefusals) {
  Result<std::vector<NamedSchema>> suite = load_schema_suite(write_suite());
  ASSERT_TRUE(suite.ok());
  Result<CompileBenchResult> r =
      run_compile_bench({.reps = 2}, structured_bench_schemas(), *suite, Observer{});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->n_schemas, 6);
  EXPECT_EQ(r->n_compiled, 5);
  EXPECT_EQ(r->n_refused, 1);
  ASSERT_EQ(r->own.size(), 3u);
  EXPECT_EQ(r->own[0].name, "person");
  EXPECT_LE(r->median_ms, r->p90_ms);
  EXPECT_LE(r->p90_ms, r->worst.ms);
  EXPECT_FALSE(r->worst.name.empty());
  ASSERT_EQ(r->refusals.size(), 1u);
  EXPECT_EQ(r->refusals[0].second, 1);
  EXPECT_NE(r->refusals[0].first.find("minProperties"), std::string::npos) << r->refusals[0].first;
  EXPECT_FALSE(run_compile_bench({.reps = 0}, {}, {}, Observer{}).ok());
}

TEST(StructuredCompileTest, RefusalReasonDropsThePath) {
  EXPECT_EQ(refusal_reason("unsupported JSON Schema keyword 'not' at #/properties/a"),
            "unsupported JSON Schema keyword 'not'");
  EXPECT_EQ(refusal_reason("'pattern' at #/x: unsupported escape"),
            "'pattern': unsupported escape");
  EXPECT_EQ(refusal_reason("no path here"), "no path here");
}

TEST(StructuredMaskTest, ColdThenWarmOnOneGrammar) {
  MaskBenchOptions options;
  options.vocab_paths = {testing::tiny_engine_model()};
  options.n_requests = 3;
  options.max_tokens = 40;
  uint64_t last_done = 0, last_total = 0;
  Observer observer;
  observer.progress = [&](const std::string&, uint64_t done, uint64_t total) {
    last_done = done;
    last_total = total;
  };
  Result<MaskBenchResult> r = run_mask_bench(options, structured_bench_schemas(), observer);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(last_done, 9u);
  EXPECT_EQ(last_total, 9u);
  ASSERT_EQ(r->vocabs.size(), 1u);
  EXPECT_EQ(r->vocabs[0].n_tokens, 2048);
  EXPECT_GT(r->vocabs[0].n_trie_nodes, 0);
  ASSERT_EQ(r->rows.size(), 3u);
  for (const MaskRow& row : r->rows) {
    EXPECT_EQ(row.cold.n_requests, 1) << row.schema;
    EXPECT_EQ(row.warm.n_requests, 2) << row.schema;
    EXPECT_EQ(row.cold.n_stuck + row.warm.n_stuck, 0) << row.schema;  // byte tokens spell anything
    EXPECT_GE(row.cold.n_computed, 1) << row.schema;
    EXPECT_LE(row.cold.n_steps, 40) << row.schema;
    EXPECT_LE(row.warm.n_steps, 80) << row.schema;
    // Each warm request's first mask (the initial state's) was cached by the cold one.
    EXPECT_GE(row.warm.n_hits, 2) << row.schema;
    EXPECT_GT(row.n_states, 0) << row.schema;
    expect_times_ordered(row.cold, row.schema + " cold");
    expect_times_ordered(row.warm, row.schema + " warm");
  }
  // The same seeds walk the same tokens.
  Result<MaskBenchResult> again = run_mask_bench(options, structured_bench_schemas(), Observer{});
  ASSERT_TRUE(again.ok());
  for (size_t i = 0; i < r->rows.size(); ++i) {
    EXPECT_EQ(again->rows[i].cold.n_steps, r->rows[i].cold.n_steps);
    EXPECT_EQ(again->rows[i].warm.n_steps, r->rows[i].warm.n_steps);
    EXPECT_EQ(again->rows[i].cold.n_computed, r->rows[i].cold.n_computed);
  }
  options.n_requests = 0;
  EXPECT_FALSE(run_mask_bench(options, structured_bench_schemas(), Observer{}).ok());
}

DecodeBenchOptions tiny_decode_options() {
  DecodeBenchOptions options;
  options.model_path = testing::tiny_engine_model();
  options.engine.n_threads = 2;
  options.batch_sizes = {1, 2};
  options.max_tokens = 8;
  options.repeats = 2;
  return options;
}

TEST(StructuredDecodeTest, ModesDoTheSameWork) {
  Result<DecodeBenchResult> r = run_decode_bench(tiny_decode_options(), Observer{});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->n_vocab, 2048);
  ASSERT_EQ(r->lengths.size(), 2u);
  ASSERT_EQ(r->jump_forward_lengths.size(), 2u);
  ASSERT_EQ(r->prompt_tokens.size(), 2u);
  for (int32_t n : r->lengths) {
    EXPECT_GE(n, 1);
    EXPECT_LE(n, 8);
  }
  EXPECT_LE(r->n_valid_json, r->n_complete);
  ASSERT_EQ(r->batches.size(), 2u);
  for (const DecodeBatchResult& b : r->batches) {
    const std::string what = "B=" + std::to_string(b.batch_size);
    const double tokens = std::accumulate(r->lengths.begin(), r->lengths.begin() + b.batch_size, 0);
    const double jump_tokens = std::accumulate(r->jump_forward_lengths.begin(),
                                               r->jump_forward_lengths.begin() + b.batch_size, 0);
    // Free text generates what the constrained requests did; greedy decoding repeats itself.
    EXPECT_EQ(b.free_text.generated_tokens, tokens) << what;
    EXPECT_EQ(b.constrained.generated_tokens, tokens) << what;
    EXPECT_EQ(b.jump_forward.generated_tokens, jump_tokens) << what;
    EXPECT_EQ(b.free_jump_lengths.generated_tokens, jump_tokens) << what;
    EXPECT_EQ(b.free_jump_lengths.forced_tokens, 0) << what;
    EXPECT_EQ(b.free_text.forced_tokens, 0) << what;
    EXPECT_EQ(b.constrained.forced_tokens, 0) << what;
    EXPECT_LE(b.jump_forward.forced_tokens, b.jump_forward.generated_tokens) << what;
    for (const DecodeModeStats* m :
         {&b.free_text, &b.constrained, &b.jump_forward, &b.free_jump_lengths}) {
      EXPECT_GT(m->engine_steps, 0) << what;
      EXPECT_GT(m->request_ms.mean, 0) << what;
      EXPECT_GE(m->tokens_per_s.mean, 0) << what;
    }
    // A forced token needs no forward pass of its own: at most one step per sampled token.
    EXPECT_LE(b.jump_forward.engine_steps,
              b.jump_forward.generated_tokens - b.jump_forward.forced_tokens + 1)
        << what;
    EXPECT_GT(b.constrained_speed_ratio, 0) << what;
    EXPECT_GT(b.jump_forward_time_ratio, 0) << what;
    EXPECT_GT(b.jump_forward_free_ratio, 0) << what;
  }
  DecodeBenchOptions bad = tiny_decode_options();
  bad.batch_sizes = {0};
  EXPECT_FALSE(run_decode_bench(bad, Observer{}).ok());
}

TEST(StructuredBenchTest, RecordCsvAndReportHoldEveryFigure) {
  StructuredOptions options;
  options.masks.vocab_paths = {testing::tiny_engine_model()};
  options.masks.n_requests = 2;
  options.masks.max_tokens = 20;
  options.schema_suite_dir = write_suite();
  options.compile.reps = 1;
  options.decode = tiny_decode_options();
  options.decode.repeats = 1;
  Result<StructuredResult> r = run_structured_bench(options, Observer{});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->notes.empty());
  nlohmann::json record = run_facts(options.decode.model_path);
  record["config"] = structured_config_json(options);
  record["results"] = structured_result_json(*r);
  const nlohmann::json& results = record["results"];
  ASSERT_TRUE(results.contains("masks"));
  ASSERT_TRUE(results.contains("compile"));
  ASSERT_TRUE(results.contains("decode"));
  EXPECT_EQ(results["masks"]["rows"].size(), 3u);
  EXPECT_EQ(results["compile"]["schemas"], 6);
  EXPECT_EQ(results["decode"]["batches"].size(), 2u);

  const CsvTable table = structured_csv(results);
  ASSERT_EQ(table.header.size(), 4u);
  bool has_warm_p99 = false, has_ratio = false, has_forced = false;
  for (const std::vector<std::string>& row : table.rows) {
    ASSERT_EQ(row.size(), 4u);
    has_warm_p99 |= row[0] == "masks" && row[1].ends_with("/person/warm") && row[2] == "p99_ms";
    has_ratio |= row[0] == "decode" && row[1] == "B=2" && row[2] == "constrained_speed_ratio";
    has_forced |= row[1] == "B=1/jump_forward" && row[2] == "forced_tokens";
  }
  EXPECT_TRUE(has_warm_p99);
  EXPECT_TRUE(has_ratio);
  EXPECT_TRUE(has_forced);

  const std::string report = structured_report(record);
  const std::string cpu = record["machine"]["cpu"].get<std::string>();
  for (const char* section : {"\n1. ", "\n2. ", "\n3. ", "\n4. "}) {
    const size_t at = report.find(section);
    ASSERT_NE(at, std::string::npos) << section << "\n" << report;
    EXPECT_NE(report.find(cpu, at), std::string::npos) << section;  // each names the CPU
  }
}

TEST(StructuredBenchTest, MissingInputsBecomeNotes) {
  StructuredOptions options;
  options.run_decode = false;
  options.compile.reps = 1;
  Result<StructuredResult> r = run_structured_bench(options, Observer{});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->masks.has_value());
  ASSERT_TRUE(r->compile.has_value());
  EXPECT_EQ(r->compile->n_schemas, 3);
  EXPECT_EQ(r->notes.size(), 2u);  // no vocabulary, no suite
  EXPECT_FALSE(r->decode.has_value());
}

}  // namespace
}  // namespace trellis::bench
