// Comma-separated values (RFC 4180 quoting) for the benchmarks' results.csv.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace trellis::bench {

// `value` as one CSV field: as is, unless it holds a comma, a double quote or a newline; then in
// double quotes, with each double quote doubled.
std::string csv_field(const std::string& value);

// A header line, then one line per row; every line ends with "\n".
std::string to_csv(const std::vector<std::string>& header,
                   const std::vector<std::vector<std::string>>& rows);

// The CSV form of a benchmark's record: one row per point or run.
struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

// One row per element of the JSON array `items`: the string field header[0] as is, then the JSON
// text of each other header field (numbers as JSON writes them, strings quoted). Precondition:
// every item has every header field, and header[0] is a string.
CsvTable csv_table(const nlohmann::json& items, std::vector<std::string> header);

}  // namespace trellis::bench
