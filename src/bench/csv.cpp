#include "bench/csv.h"

namespace trellis::bench {

std::string csv_field(const std::string& value) {
  if (value.find_first_of(",\"\n") == std::string::npos) return value;
  std::string quoted = "\"";
  for (char c : value) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

std::string to_csv(const std::vector<std::string>& header,
                   const std::vector<std::vector<std::string>>& rows) {
  auto line = [](const std::vector<std::string>& values) {
    std::string out;
    for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + csv_field(values[i]);
    return out + "\n";
  };
  std::string csv = line(header);
  for (const auto& row : rows) csv += line(row);
  return csv;
}

CsvTable csv_table(const nlohmann::json& items, std::vector<std::string> header) {
  CsvTable table{std::move(header), {}};
  for (const nlohmann::json& item : items) {
    std::vector<std::string> row = {item[table.header[0]].get<std::string>()};
    for (size_t i = 1; i < table.header.size(); ++i) row.push_back(item[table.header[i]].dump());
    table.rows.push_back(std::move(row));
  }
  return table;
}

}  // namespace trellis::bench
