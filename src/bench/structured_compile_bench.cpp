#include "bench/structured_compile_bench.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "bench/stats.h"

namespace trellis::bench {

namespace structured_compile_detail {
namespace {

using Clock = std::chrono::steady_clock;

// The median time of `reps` compiles, or the refusal's message.
struct Compiled {
  bool ok = false;
  double ms = 0;
  std::string error;
};

Compiled time_compile(const NamedSchema& schema, int32_t reps) {
  std::vector<double> times;
  for (int32_t rep = 0; rep < reps; ++rep) {
    const Clock::time_point start = Clock::now();
    Result<Grammar> grammar = compile_json_schema(schema.schema);
    times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    if (!grammar.ok()) return {false, 0, grammar.error().message};
  }
  return {true, percentile(times, 0.5), ""};
}

// The `limit` most frequent reasons, most frequent first (ties: alphabetical).
std::vector<std::pair<std::string, int32_t>> top_reasons(
    const std::map<std::string, int32_t>& counts, size_t limit) {
  std::vector<std::pair<std::string, int32_t>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  if (sorted.size() > limit) sorted.resize(limit);
  return sorted;
}

}  // namespace
}  // namespace structured_compile_detail

std::string refusal_reason(const std::string& message) {
  // "REASON at #/a/b: DETAIL" -> "REASON: DETAIL" (the path makes every message distinct).
  std::string reason = message;
  const size_t at = reason.find(" at ");
  if (at != std::string::npos) {
    const size_t path_end = reason.find_first_of(" :", at + 4);
    reason = reason.substr(0, at) + (path_end == std::string::npos ? "" : reason.substr(path_end));
  }
  constexpr size_t kMaxLength = 90;
  if (reason.size() > kMaxLength) reason = reason.substr(0, kMaxLength - 3) + "...";
  return reason;
}

Result<CompileBenchResult> run_compile_bench(const CompileBenchOptions& options,
                                             const std::vector<NamedSchema>& own,
                                             const std::vector<NamedSchema>& suite,
                                             const Observer& observer) {
  namespace d = structured_compile_detail;
  if (options.reps < 1) return Error{"compile repetitions must be at least 1"};
  CompileBenchResult result;
  std::vector<CompileTime> compiled;
  std::map<std::string, int32_t> reasons;
  const uint64_t total = own.size() + suite.size();
  observer.report_progress("compile", 0, total);
  for (size_t i = 0; i < total; ++i) {
    const NamedSchema& schema = i < own.size() ? own[i] : suite[i - own.size()];
    const d::Compiled c = d::time_compile(schema, options.reps);
    if (c.ok) {
      compiled.push_back({schema.name, c.ms});
      if (i < own.size()) result.own.push_back(compiled.back());
    } else {
      if (i < own.size()) return Error{"schema " + schema.name + ": " + c.error};
      ++result.n_refused;
      ++reasons[refusal_reason(c.error)];
    }
    observer.report_progress("compile", i + 1, total);
  }
  result.n_schemas = static_cast<int32_t>(total);
  result.n_compiled = static_cast<int32_t>(compiled.size());
  std::vector<double> times;
  for (const CompileTime& t : compiled) {
    times.push_back(t.ms);
    if (t.ms >= result.worst.ms) result.worst = t;
  }
  result.median_ms = percentile(times, 0.5);
  result.p90_ms = percentile(times, 0.9);
  result.refusals = d::top_reasons(reasons, 8);
  return result;
}

}  // namespace trellis::bench
