// What the `trellis bench` commands share around a runner of src/bench: the model and engine
// config from the flags, progress bars, where the results went, plot warnings and errors.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/progress_bar.h"
#include "base/result.h"
#include "bench/csv.h"
#include "bench/observer.h"
#include "engine/engine.h"
#include "engine_options.h"

namespace trellis::cli {

// Draws a runner's progress reports as one ProgressBar per stage (on stderr, when a terminal).
class ProgressPrinter {
 public:
  // An observer whose progress callback draws here and whose row callback is `on_row` (may be
  // empty). The printer must outlive the runner's call.
  bench::Observer observer(std::function<void(const nlohmann::json&)> on_row = {});

 private:
  void update(const std::string& stage, uint64_t done, uint64_t total);
  std::unique_ptr<ProgressBar> bar_;
  std::string stage_;
};

// Sets `model_path` (-m, or the default model's path when not given, made if absent;
// `options.model` too) and `engine` (the engine config of the flags). False, the error printed,
// for a bad flag.
bool resolve_engine(EngineOptions& options, std::string& model_path, EngineConfig& engine);

// With --pipeline, each stage's layers, busy time (against `wall_s`, the bench's duration, to
// show the bubble), bytes sent per step and peak RSS: a table on stderr, and as JSON.
void print_stage_stats(const Pipeline* pipeline, double wall_s);
nlohmann::json stage_stats_json(const Pipeline* pipeline);

// Prints "error: MESSAGE" on stderr and returns the exit code 1.
int print_error(const std::string& message);

// write_results, then "results written to DIR/ (results.json, results.csv)" on stderr; the folder,
// or the error (already printed).
Result<std::string> save_results(const std::string& requested_dir, const std::string& bench,
                                 const nlohmann::json& record, const bench::CsvTable& table);

// "plot written to PATH", or a warning with the reason there is none (the bench still succeeds).
void report_plot(const Result<std::string>& png);

}  // namespace trellis::cli
