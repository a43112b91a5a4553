#include "model/synth_layout.h"

#include <cassert>
#include <cmath>
#include <optional>

#include "gguf/gguf_writer.h"
#include "model/architecture.h"
#include "model/family_keys.h"
#include "model/family_tensors.h"
#include "quant/quant.h"

namespace trellis {
namespace {

DType weight_type(DType requested, int64_t row_length) {
  return row_bytes(requested, row_length).has_value() ? requested : DType::F16;
}

// Whether the preset's file holds the optional tensor `spec`: the output matrix unless the preset
// ties it, the rope factors of the scaling the preset has.
bool preset_has(const ModelPreset& preset, const TensorSpec& spec) {
  if (spec.presence == Presence::REQUIRED) return true;
  if (spec.name == kOutput.name) return !preset.tied_output;
  if (spec.name == kRopeFreqs.name) return preset.llama3_rope.has_value();
  if (spec.name == kRopeFactorsShort.name || spec.name == kRopeFactorsLong.name)
    return preset.longrope.has_value();
  assert(false && "an optional tensor the synthesizer does not know");
  return false;
}

// The values of a ROPE_FACTORS tensor: Llama 3's factors, or LongRoPE's short or long ones.
std::vector<float> rope_factor_values(const ModelPreset& preset, const TensorSpec& spec) {
  const ModelHParams& hp = preset.hparams;
  if (spec.name == kRopeFreqs.name)
    return llama3_rope_factors(*preset.llama3_rope, hp.n_rot, hp.rope_freq_base);
  return longrope_factors(*preset.longrope, hp.n_rot, hp.n_ctx_train,
                          spec.name == kRopeFactorsLong.name);
}

SynthTensor synth_tensor(const ModelPreset& preset, const TensorSpec& spec, std::string name,
                         DType type) {
  std::vector<int64_t> shape = tensor_shape(spec, preset.hparams);
  switch (spec.kind) {
    case TensorKind::MATRIX:
    case TensorKind::EXPERTS:
      return SynthTensor{
          std::move(name), weight_type(type, shape[0]), std::move(shape), SynthFill::NORMAL, {}};
    case TensorKind::ROUTER: {
      const auto stddev = static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape[0])));
      return SynthTensor{std::move(name),   DType::F32, std::move(shape),
                         SynthFill::NORMAL, {},         stddev};
    }
    case TensorKind::BIAS:
      return SynthTensor{std::move(name), DType::F32, std::move(shape), SynthFill::NORMAL, {}};
    case TensorKind::SINKS:
      return SynthTensor{std::move(name),   DType::F32, std::move(shape),
                         SynthFill::NORMAL, {},         1.0f};
    case TensorKind::NORM:
      return SynthTensor{std::move(name), DType::F32, std::move(shape), SynthFill::ONES, {}};
    case TensorKind::ROPE_FACTORS:
      return SynthTensor{std::move(name), DType::F32, std::move(shape), SynthFill::VALUES,
                         rope_factor_values(preset, spec)};
  }
  assert(false && "unknown tensor kind");
  return {};
}

// The value the preset's file has for `key`, or nullopt when it leaves the key out (the reader's
// default is then the preset's value).
std::optional<GgufValue> key_value(const ModelPreset& preset, HParamKey key) {
  const ModelHParams& hp = preset.hparams;
  auto u32 = [](int64_t v) { return GgufValue{static_cast<uint32_t>(v)}; };
  auto f32 = [](double v) { return GgufValue{static_cast<float>(v)}; };
  const bool own_head_size = hp.n_embd % hp.n_head != 0 || hp.head_dim() != hp.n_embd / hp.n_head;
  const bool scaled = hp.rope_freq_scale != 1.0 || hp.rope_yarn;
  switch (key) {
    case HParamKey::VOCAB_SIZE:
      return u32(hp.n_vocab);
    case HParamKey::CONTEXT_LENGTH:
      return u32(hp.n_ctx_train);
    case HParamKey::EMBEDDING_LENGTH:
      return u32(hp.n_embd);
    case HParamKey::BLOCK_COUNT:
      return u32(hp.n_layer);
    case HParamKey::FEED_FORWARD_LENGTH:
      return u32(hp.n_ff);
    case HParamKey::ROPE_DIMENSION_COUNT:
      return u32(hp.n_rot);
    case HParamKey::HEAD_COUNT:
      return u32(hp.n_head);
    case HParamKey::HEAD_COUNT_KV:
      return u32(hp.n_head_kv);
    case HParamKey::RMS_EPS:
      return f32(hp.rms_norm_eps);
    case HParamKey::ROPE_FREQ_BASE:
      return f32(hp.rope_freq_base);
    case HParamKey::KEY_LENGTH:
    case HParamKey::VALUE_LENGTH:
      if (own_head_size) return u32(hp.head_dim());
      return std::nullopt;
    case HParamKey::ROPE_SCALING_TYPE:
      if (scaled) return GgufValue{std::string(hp.rope_yarn ? "yarn" : "linear")};
      return std::nullopt;
    case HParamKey::ROPE_SCALING_FACTOR:
      if (scaled) return f32(1.0 / hp.rope_freq_scale);
      return std::nullopt;
    case HParamKey::ROPE_SCALE_LINEAR:  // superseded by rope.scaling.*
      return std::nullopt;
    case HParamKey::ROPE_ATTN_FACTOR:
      if (preset.longrope) return f32(hp.rope_attn_factor);
      return std::nullopt;
    case HParamKey::ROPE_ORIGINAL_CONTEXT:
      if (preset.longrope || hp.rope_yarn) return u32(hp.n_ctx_orig);
      return std::nullopt;
    case HParamKey::SLIDING_WINDOW:
      return u32(hp.n_swa);
    case HParamKey::SLIDING_WINDOW_PATTERN:
      return u32(hp.swa_pattern);
    case HParamKey::ROPE_FREQ_BASE_SWA:
      return f32(hp.rope_freq_base_swa);
    case HParamKey::EXPERT_COUNT:
      return u32(hp.n_expert);
    case HParamKey::EXPERT_USED_COUNT:
      return u32(hp.n_expert_used);
    case HParamKey::EXPERT_FEED_FORWARD_LENGTH:
      return u32(hp.n_ff_exp);
    case HParamKey::EXPERT_SHARED_FEED_FORWARD_LENGTH:
      return u32(hp.n_ff_shexp);
  }
  return std::nullopt;
}

}  // namespace

std::vector<SynthTensor> synth_tensor_list(const ModelPreset& preset, DType type) {
  const Architecture* arch = find_architecture(preset.hparams.arch);
  assert(arch != nullptr);
  const FamilyTensors& family = family_tensors(*arch);
  std::vector<SynthTensor> list;
  auto add_global = [&](const TensorSpec& spec) {
    if (preset_has(preset, spec))
      list.push_back(synth_tensor(preset, spec, std::string(spec.name), type));
  };
  for (const TensorSpec& spec : family.before_layers) add_global(spec);
  for (int64_t il = 0; il < preset.hparams.n_layer; ++il) {
    for (const TensorSpec& spec : family.layer) {
      if (preset_has(preset, spec))
        list.push_back(synth_tensor(preset, spec, layer_tensor_name(il, spec), type));
    }
  }
  for (const TensorSpec& spec : family.after_layers) add_global(spec);
  return list;
}

void set_arch_metadata(GgufWriter& writer, const ModelPreset& preset) {
  const Architecture* arch = find_architecture(preset.hparams.arch);
  assert(arch != nullptr);
  writer.set("general.architecture", GgufValue{std::string(file_architecture(*arch))});
  for (const KeySpec& spec : family_keys(*arch)) {
    std::optional<GgufValue> value = key_value(preset, spec.key);
    if (value) writer.set(key_name(*arch, spec.key), std::move(*value));
  }
}

}  // namespace trellis
