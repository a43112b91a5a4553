// The text `trellis bench structured` prints: one section per figure, each headed with the CPU
// model (the figures are CPU-bound), from the record the command also writes to results.json.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace trellis::bench {

// `record`: run_facts() plus "config" and "results" (structured_result_json). Sections of parts
// that did not run are left out; the notes come last.
std::string structured_report(const nlohmann::json& record);

}  // namespace trellis::bench
