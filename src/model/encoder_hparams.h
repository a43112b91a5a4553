// The encoder families (BERT-style embedding models and cross-encoder rerankers) as llama.cpp's
// converter writes them, and their hyperparameters. Unlike the decoder families
// (model/architecture.h) they attend both ways, keep no KV cache, normalize with LayerNorm and
// biases, and end in a pooling (model/pooling.h) instead of logits.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "base/result.h"
#include "model/pooling.h"

namespace trellis {

class GgufFile;

struct EncoderFamily {
  std::string_view name;  // general.architecture, also the prefix of its keys
  // Learned absolute positions (position_embd, BERT), else rotary ones on q and k (nomic-bert).
  bool absolute_positions = true;
  // The feed-forward: up, GELU, down, all with biases (BERT); or SwiGLU without biases
  // (nomic-bert: down(silu(gate) * up)).
  bool gated_ffn = false;
};

// bert, nomic-bert.
std::span<const EncoderFamily> encoder_families();
// The family whose general.architecture is `name`, or null.
const EncoderFamily* find_encoder_family(std::string_view name);
// "bert, nomic-bert"
std::string encoder_family_names();

struct EncoderHParams {
  const EncoderFamily* family = nullptr;
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;  // the longest input (BERT: the rows of position_embd)
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_ff = 0;
  double norm_eps = 1e-12;          // attention.layer_norm_epsilon
  double rope_freq_base = 10000.0;  // rotary families
  int64_t n_rot = 0;                // rotated elements per head (rotary families)
  int64_t n_token_types = 0;        // rows of token_types (tokenizer.ggml.token_type_count)
  Pooling pooling = Pooling::MEAN;  // pooling_type; MEAN when the file does not say
  int64_t n_cls_out = 0;            // RANK: the classifier's outputs (1 unless labels say)

  int64_t head_dim() const { return n_embd / n_head; }
};

// Reads and validates the hyperparameters of an encoder file: a known family, positive sizes,
// heads dividing the width, a pooling we serve (not NONE), bidirectional attention.
Result<EncoderHParams> read_encoder_hparams(const GgufFile& file);

}  // namespace trellis
