// How a benchmark runner reports while it runs. The library never prints: the caller (the CLI)
// decides what to show, and leaves a callback empty to ignore that kind of report.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace trellis::bench {

struct Observer {
  // Progress of the current stage (a label such as "phi 0.5", "B=16", "cache on"): called with
  // done = 0 when the stage starts, then after each unit of work, the last time with
  // done == total. Stages do not nest.
  std::function<void(const std::string& stage, uint64_t done, uint64_t total)> progress;
  // A result row as soon as it is measured (the same object that the record will hold).
  std::function<void(const nlohmann::json& row)> row;

  void report_progress(const std::string& stage, uint64_t done, uint64_t total) const {
    if (progress) progress(stage, done, total);
  }
  void report_row(const nlohmann::json& r) const {
    if (row) row(r);
  }
};

}  // namespace trellis::bench
