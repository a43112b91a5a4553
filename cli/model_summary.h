// A GGUF file described for people (text) and programs (JSON): `trellis model info`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "gguf/gguf_file.h"

namespace trellis::cli {

nlohmann::ordered_json model_summary_json(const GgufFile& file);
std::string model_summary_text(const GgufFile& file);

}  // namespace trellis::cli
