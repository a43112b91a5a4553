// Hyperparameters of a Llama-architecture model, read from GGUF metadata (`llama.*` keys).
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"

namespace trellis {

class GgufFile;

struct LlamaHParams {
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;  // llama.context_length
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t n_ff = 0;
  int64_t n_rot = 0;  // rope.dimension_count; defaults to the head size
  double rope_freq_base = 10000.0;
  double rope_freq_scale = 1.0;  // 1 / rope.scale_linear
  double rms_norm_eps = 1e-5;

  int64_t head_dim() const { return n_embd / n_head; }
  int64_t n_embd_kv() const { return head_dim() * n_head_kv; }
};

// Reads and validates the hyperparameters (positive sizes, heads dividing the width, GQA ratio).
// The vocab size comes from llama.vocab_size or the tokenizer's token list.
Result<LlamaHParams> read_llama_hparams(const GgufFile& file);

}  // namespace trellis
