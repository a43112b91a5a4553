// Where benchmark results go: a folder per run holding results.json and results.csv, with the
// facts that make a figure reproducible (machine, model file and its SHA-256, source commit).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/result.h"
#include "bench/csv.h"

namespace trellis::bench {

// CPU model, logical cores, and the operating system's name for the machine.
nlohmann::json machine_json();
// The model file's path, size and SHA-256.
Result<nlohmann::json> model_file_json(const std::string& path);
// The source commit the library was configured from ("unknown" outside a git checkout).
std::string source_commit();
// What every record carries: {"machine", "commit", "model"}; "model" is model_file_json(path),
// or only {"path"} when the file cannot be read.
nlohmann::json run_facts(const std::string& model_path);

// `requested` when given, else bench-results/<bench>-<YYYYmmdd-HHMMSS>; created if missing.
Result<std::string> prepare_out_dir(const std::string& requested, const std::string& bench);

Status write_file(const std::string& path, const std::string& content);

// Writes results.json (the record, indented) and results.csv (the table) into
// prepare_out_dir(requested_dir, bench) and returns the folder. Prints nothing.
Result<std::string> write_results(const std::string& requested_dir, const std::string& bench,
                                  const nlohmann::json& record, const CsvTable& table);

}  // namespace trellis::bench
