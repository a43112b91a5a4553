// The hyperparameter keys a family's GGUF files carry (ARCH.* after general.architecture), and
// which of them are required. read_model_hparams checks and reads them from this list and
// set_arch_metadata writes from it, in its order, so the names are written once; a file that
// lacks a required key is rejected by its name.
//
// The list is derived from the family's row (model/architecture.h): every family has the common
// keys, the FFN kind selects its own, and families with a sliding window add its keys.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "model/architecture.h"

namespace trellis {

enum class HParamKey {
  VOCAB_SIZE,  // optional: the tokenizer's token list gives it otherwise
  CONTEXT_LENGTH,
  EMBEDDING_LENGTH,
  BLOCK_COUNT,
  FEED_FORWARD_LENGTH,
  ROPE_DIMENSION_COUNT,
  HEAD_COUNT,
  HEAD_COUNT_KV,
  RMS_EPS,
  ROPE_FREQ_BASE,
  KEY_LENGTH,
  VALUE_LENGTH,
  ROPE_SCALING_TYPE,
  ROPE_SCALING_FACTOR,
  ROPE_SCALE_LINEAR,  // the older spelling of a linear rope.scaling.factor
  ROPE_ATTN_FACTOR,
  ROPE_ORIGINAL_CONTEXT,
  SLIDING_WINDOW,
  SLIDING_WINDOW_PATTERN,
  ROPE_FREQ_BASE_SWA,
  EXPERT_COUNT,
  EXPERT_USED_COUNT,
  EXPERT_FEED_FORWARD_LENGTH,
  EXPERT_SHARED_FEED_FORWARD_LENGTH,
};

struct KeySpec {
  HParamKey key;
  std::string_view suffix;  // the name after "ARCH."
  Presence presence;
};

// The keys of `arch`'s files (a supported family), in the order the synthesizer writes them.
const std::vector<KeySpec>& family_keys(const Architecture& arch);

// "ARCH.<suffix>" with the family's file name (file_architecture), e.g.
// "qwen3.attention.key_length", "llama.expert_count" for mixtral.
std::string key_name(const Architecture& arch, HParamKey key);

}  // namespace trellis
