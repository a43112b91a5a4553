// How a model's transformer blocks are divided between the stages of a pipeline: contiguous
// ranges, balanced by the bytes of weights each stage holds (its blocks, plus the token embeddings
// on the first stage and the output head on the last), or as the user says.
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "gguf/gguf_file.h"
#include "model/layer_range.h"

namespace trellis {

// The bytes of weights each part of a model's file takes.
struct ModelWeightBytes {
  std::vector<uint64_t> layers;  // [n_layer]: tensors named blk.<i>.*
  uint64_t embeddings = 0;       // token_embd, when the output head is a separate tensor
  uint64_t output = 0;           // the output head (token_embd when tied) and its norm
};

ModelWeightBytes weight_bytes(const GgufFile& file, int64_t n_layer);

// n_stages contiguous non-empty ranges that minimise the largest stage's bytes.
Result<std::vector<LayerRange>> balanced_split(const ModelWeightBytes& bytes, int n_stages);

// The ranges given as layer counts per stage ("8,7,7"); they must cover every layer.
Result<std::vector<LayerRange>> split_by_counts(const std::vector<int64_t>& counts,
                                                int64_t n_layer);

// The stages of `file`'s model: split_by_counts(counts) when counts are given, else balanced.
Result<std::vector<LayerRange>> split_layers(const GgufFile& file, int n_stages,
                                             const std::vector<int64_t>& counts);

// The bytes stage `range` holds.
uint64_t stage_bytes(const ModelWeightBytes& bytes, const LayerRange& range);

}  // namespace trellis
