// How a model's transformer blocks are divided between the stages of a pipeline: contiguous
// ranges, balanced by the bytes of weights each stage reads per token (its blocks, plus the output
// head on the last stage), or as the user says. The token embeddings live on the first stage but
// do not count: a step reads one row per token of them, so they cost neither time nor resident
// memory (the pages of rows never looked up are never read).
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
