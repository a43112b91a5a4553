// Where benchmark results go: a folder per run holding results.json and results.csv, with the
// facts that make a figure reproducible (machine, model file and its SHA-256, source commit).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"

namespace trellis::cli {

// CPU model, logical cores, and the operating system's name for the machine.
nlohmann::json machine_json();
// The model file's path, size and SHA-256.
Result<nlohmann::json> model_file_json(const std::string& path);
// The source commit the binary was configured from ("unknown" outside a git checkout).
std::string source_commit();

// `requested` when given, else bench-results/<bench>-<YYYYmmdd-HHMMSS>; created if missing.
Result<std::string> prepare_out_dir(const std::string& requested, const std::string& bench);

// Comma-separated values with a header line; fields with a comma, quote or newline are quoted.
std::string to_csv(const std::vector<std::string>& header,
                   const std::vector<std::vector<std::string>>& rows);

Status write_file(const std::string& path, const std::string& content);

// The CSV form of a benchmark's record: one row per point or run.
struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

// One row per element of `items`: the string field header[0] as is, then the JSON text of each
// other header field.
CsvTable csv_table(const nlohmann::json& items, std::vector<std::string> header);

// Writes results.json (the record) and results.csv (the table) into prepare_out_dir(requested,
// bench), says where on stderr, and returns the folder.
Result<std::string> write_results(const std::string& requested_dir, const std::string& bench,
                                  const nlohmann::json& record, const CsvTable& table);

}  // namespace trellis::cli
