#include "model/family_keys.h"

#include <array>
#include <cassert>

namespace trellis {
namespace {

constexpr Presence REQUIRED = Presence::REQUIRED, OPTIONAL = Presence::OPTIONAL;

// Every key any family has, each written once.
constexpr std::array<KeySpec, 24> kKeys = {{
    {HParamKey::VOCAB_SIZE, "vocab_size", OPTIONAL},
    {HParamKey::CONTEXT_LENGTH, "context_length", REQUIRED},
    {HParamKey::EMBEDDING_LENGTH, "embedding_length", REQUIRED},
    {HParamKey::BLOCK_COUNT, "block_count", REQUIRED},
    {HParamKey::FEED_FORWARD_LENGTH, "feed_forward_length", REQUIRED},
    {HParamKey::ROPE_DIMENSION_COUNT, "rope.dimension_count", OPTIONAL},
    {HParamKey::HEAD_COUNT, "attention.head_count", REQUIRED},
    {HParamKey::HEAD_COUNT_KV, "attention.head_count_kv", OPTIONAL},
    {HParamKey::RMS_EPS, "attention.layer_norm_rms_epsilon", OPTIONAL},
    {HParamKey::ROPE_FREQ_BASE, "rope.freq_base", OPTIONAL},
    {HParamKey::KEY_LENGTH, "attention.key_length", OPTIONAL},
    {HParamKey::VALUE_LENGTH, "attention.value_length", OPTIONAL},
    {HParamKey::ROPE_SCALING_TYPE, "rope.scaling.type", OPTIONAL},
    {HParamKey::ROPE_SCALING_FACTOR, "rope.scaling.factor", OPTIONAL},
    {HParamKey::ROPE_SCALE_LINEAR, "rope.scale_linear", OPTIONAL},
    {HParamKey::ROPE_ATTN_FACTOR, "rope.scaling.attn_factor", OPTIONAL},
    {HParamKey::ROPE_ORIGINAL_CONTEXT, "rope.scaling.original_context_length", OPTIONAL},
    {HParamKey::SLIDING_WINDOW, "attention.sliding_window", OPTIONAL},
    {HParamKey::SLIDING_WINDOW_PATTERN, "attention.sliding_window_pattern", OPTIONAL},
    {HParamKey::ROPE_FREQ_BASE_SWA, "rope.freq_base_swa", OPTIONAL},
    {HParamKey::EXPERT_COUNT, "expert_count", REQUIRED},
    {HParamKey::EXPERT_USED_COUNT, "expert_used_count", REQUIRED},
    {HParamKey::EXPERT_FEED_FORWARD_LENGTH, "expert_feed_forward_length", OPTIONAL},
    {HParamKey::EXPERT_SHARED_FEED_FORWARD_LENGTH, "expert_shared_feed_forward_length", OPTIONAL},
}};

const KeySpec& spec(HParamKey key) {
  for (const KeySpec& s : kKeys) {
    if (s.key == key) return s;
  }
  assert(false && "every HParamKey has a row in kKeys");
  return kKeys.front();
}

std::vector<KeySpec> keys_of(const Architecture& arch) {
  std::vector<KeySpec> list;
  auto add = [&](std::initializer_list<HParamKey> keys) {
    for (HParamKey key : keys) list.push_back(spec(key));
  };
  add({HParamKey::VOCAB_SIZE, HParamKey::CONTEXT_LENGTH, HParamKey::EMBEDDING_LENGTH,
       HParamKey::BLOCK_COUNT});
  switch (arch.ffn_kind) {
    case FfnKind::DENSE:
      add({HParamKey::FEED_FORWARD_LENGTH});
      break;
    case FfnKind::MOE:
      // As llama.cpp reads them for these families; the routing itself (gating, renormalizing)
      // is the family's, whatever expert_gating_func or expert_weights_norm a file may carry.
      add({HParamKey::FEED_FORWARD_LENGTH, HParamKey::EXPERT_COUNT, HParamKey::EXPERT_USED_COUNT});
      if (arch.expert_ffn_key) add({HParamKey::EXPERT_FEED_FORWARD_LENGTH});
      if (arch.shared_expert) add({HParamKey::EXPERT_SHARED_FEED_FORWARD_LENGTH});
      break;
  }
  // The rope scaling keys are read for every family (a file may scale linearly or carry an
  // attention factor whatever its family), not only for the LongRoPE ones.
  add({HParamKey::ROPE_DIMENSION_COUNT, HParamKey::HEAD_COUNT, HParamKey::HEAD_COUNT_KV,
       HParamKey::RMS_EPS, HParamKey::ROPE_FREQ_BASE, HParamKey::KEY_LENGTH,
       HParamKey::VALUE_LENGTH, HParamKey::ROPE_SCALING_TYPE, HParamKey::ROPE_SCALING_FACTOR,
       HParamKey::ROPE_SCALE_LINEAR, HParamKey::ROPE_ATTN_FACTOR,
       HParamKey::ROPE_ORIGINAL_CONTEXT});
  if (arch.sliding_window) {
    add({HParamKey::SLIDING_WINDOW, HParamKey::SLIDING_WINDOW_PATTERN,
         HParamKey::ROPE_FREQ_BASE_SWA});
  }
  return list;
}

}  // namespace

const std::vector<KeySpec>& family_keys(const Architecture& arch) {
  static const std::vector<std::vector<KeySpec>> lists =
      build_per_architecture([](const Architecture& a) { return keys_of(a); });
  return lists[architecture_index(arch)];
}

std::string key_name(const Architecture& arch, HParamKey key) {
  return std::string(file_architecture(arch)) + "." + std::string(spec(key).suffix);
}

}  // namespace trellis
