// `trellis bench structured`, part 2: what compiling a schema costs a request (json_schema_to_gbnf
// then parse_gbnf, as the server's ConstraintCompiler does on a cache miss), over the bench's own
// schemas and every schema of a JSON-Schema-Test-Suite folder. Schemas outside the supported
// subset are refused: counted (with the most common reasons), never timed.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "bench/observer.h"
#include "bench/structured_schemas.h"

namespace trellis::bench {

struct CompileBenchOptions {
  int32_t reps = 3;  // compiles per schema; its time is their median
};

struct CompileTime {
  std::string name;
  double ms = 0;
};

struct CompileBenchResult {
  int32_t n_schemas = 0;
  int32_t n_compiled = 0;
  int32_t n_refused = 0;         // n_compiled + n_refused == n_schemas
  std::vector<CompileTime> own;  // the bench's own schemas, each (all compile)
  double median_ms = 0;          // over the compiled schemas
  double p90_ms = 0;
  CompileTime worst;  // the slowest compiled schema
  // The most common refusals, most frequent first (at most 8): a reason ("unsupported JSON
  // Schema keyword 'not'", or the message up to its first " at " / ":") and its count.
  std::vector<std::pair<std::string, int32_t>> refusals;
};

// Compiles each schema reps times. Errors: reps < 1. Progress: stage "compile", one unit per
// schema.
Result<CompileBenchResult> run_compile_bench(const CompileBenchOptions& options,
                                             const std::vector<NamedSchema>& own,
                                             const std::vector<NamedSchema>& suite,
                                             const Observer& observer);

// The reason a refusal is counted under (see CompileBenchResult::refusals).
std::string refusal_reason(const std::string& message);

}  // namespace trellis::bench
