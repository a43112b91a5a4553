// Architecture shapes the project can synthesize models for.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/model_hparams.h"

namespace trellis {

struct ModelPreset {
  std::string name;
  std::string description;
  ModelHParams hparams;
};

// tiny (a few MB, for tests), small (~110M parameters), tinyllama-1.1b (TinyLlama-1.1B's shapes).
const std::vector<ModelPreset>& model_presets();
std::optional<ModelPreset> find_model_preset(std::string_view name);

}  // namespace trellis
