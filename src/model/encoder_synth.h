// Writes encoder GGUFs (model/encoder_hparams.h: bert, nomic-bert) with deterministic random
// weights and the project's WordPiece vocab, in the shapes of the real embedding models and
// rerankers, as llama.cpp's converter lays them out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "model/encoder_hparams.h"
#include "tensor/dtype.h"

namespace trellis {

struct EncoderPreset {
  std::string_view name;
  std::string_view description;
  int64_t n_vocab, n_ctx, n_embd, n_layer, n_head, n_ff;
};

// tiny (tests), minilm (all-MiniLM-L6-v2), bge-small, bge-base, nomic-embed (nomic-embed-text
// v1.5's shapes).
std::span<const EncoderPreset> encoder_presets();
const EncoderPreset* find_encoder_preset(std::string_view name);
std::string encoder_preset_names();

struct EncoderSynthOptions {
  const EncoderPreset* preset = nullptr;
  const EncoderFamily* family = nullptr;
  // MEAN, CLS or LAST: an embedding model; RANK: a cross-encoder reranker with a classification
  // head (dense + tanh, then one score).
  Pooling pooling = Pooling::MEAN;
  DType type = DType::F16;  // weight matrices; norms and biases are f32
  uint64_t seed = 0;
  std::string output_path;
  int n_threads = 0;
  bool show_progress = true;
};

Status synthesize_encoder(const EncoderSynthOptions& options);

}  // namespace trellis
