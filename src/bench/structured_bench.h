// `trellis bench structured`: what structured outputs (JSON schema constraints) cost, in four
// figures:
//   1. masks    the token mask per decode step on real vocabularies, cold and warm
//               (structured_mask_bench.h; targets: mean <= 0.5 ms, p99 <= 5 ms)
//   2. compile  schema -> grammar time over the bench's schemas and a JSON-Schema-Test-Suite
//               folder, with how many the subset refuses (structured_compile_bench.h)
//   3. decode   tokens/s of constrained vs free-text decoding at batch 1 and 8
//   4.          jump-forward on vs off: time per request, engine steps, forced tokens
//               (3 and 4: structured_decode_bench.h)
// Each part can be left out; the runner only measures, the caller prints (structured_report.h).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "bench/csv.h"
#include "bench/observer.h"
#include "bench/structured_compile_bench.h"
#include "bench/structured_decode_bench.h"
#include "bench/structured_mask_bench.h"

namespace trellis::bench {

struct StructuredOptions {
  bool run_masks = true;
  bool run_compile = true;
  bool run_decode = true;
  MaskBenchOptions masks;        // no vocab_paths: part 1 is skipped, with a note
  std::string schema_suite_dir;  // empty: part 2 times the bench's own schemas only, with a note
  CompileBenchOptions compile;
  DecodeBenchOptions decode;
};

struct StructuredResult {
  std::optional<MaskBenchResult> masks;
  std::optional<CompileBenchResult> compile;
  std::string schema_suite_dir;  // where the suite's schemas came from (empty: none)
  std::optional<DecodeBenchResult> decode;
  std::vector<std::string> notes;  // what was skipped, and why
};

// Errors: those of the parts (a bad count, an unreadable vocabulary or suite, the engine).
Result<StructuredResult> run_structured_bench(const StructuredOptions& options,
                                              const Observer& observer);

// The record's "config": the parts run and their sizes ("mask_requests", "mask_max_tokens",
// "mask_seed", "longest_share", "vocabs", "schema_suite_dir", "compile_reps", "batch_sizes",
// "max_tokens", "repeats", "prompt").
nlohmann::json structured_config_json(const StructuredOptions& options);

// The record's "results": {"masks": {"vocabs", "rows"}, "compile": {...}, "decode": {...},
// "notes"}, parts that did not run absent.
nlohmann::json structured_result_json(const StructuredResult& result);

// results.csv in long form, one figure a row: part, subject (say "qwen2/person/warm", "B=8/free"),
// metric, value.
CsvTable structured_csv(const nlohmann::json& results);

}  // namespace trellis::bench
