// Shapes and families the project can synthesize models for: small test presets, and presets
// with the published shapes of real models (so benchmarks run on realistic shapes without
// downloads).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "model/model_hparams.h"

namespace trellis {

// Llama 3's rope scaling (HF rope_scaling {rope_type: llama3, ...}). GGUF files carry it only as
// the tensor rope_freqs.weight: one divisor per rotated pair, see llama3_rope_factors().
struct Llama3RopeScaling {
  double factor = 32.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_context = 8192;
};

// LongRoPE (Phi-3.5-mini, Phi-4-mini): per-pair frequency divisors for contexts up to
// original_context (the short factors) and beyond it (the long ones), and an attention factor
// sqrt(1 + ln(n_ctx_train / original_context) / ln(original_context)) as llama.cpp's converter
// derives it. Files carry them as rope_factors_short/long.weight and rope.scaling.* keys.
struct LongRopeScaling {
  int64_t original_context = 4096;
};

struct ModelPreset {
  std::string name;
  std::string description;
  ModelHParams hparams;      // hparams.arch is the family written to general.architecture
  bool tied_output = false;  // no output.weight: the logits reuse token_embd.weight
  std::optional<Llama3RopeScaling> llama3_rope;  // write rope_freqs.weight (arch llama only)
  std::optional<LongRopeScaling> longrope;       // write LongRoPE's factors (arch phi3 only)
};

// tiny (a few MB, for tests), tiny-wide (the same with rows of 256, which the K-quants need),
// small (~110M parameters), tinyllama-1.1b (TinyLlama-1.1B's shapes), all llama; then the
// published shapes of llama-3.2-1b, qwen2.5-0.5b, qwen3-0.6b, gemma-3-1b and phi-3.5-mini, and of
// the mixtures of experts qwen3-30b-a3b, qwen1.5-moe-a2.7b, olmoe-1b-7b, mixtral-8x7b and
// gpt-oss-20b, each in its own family.
const std::vector<ModelPreset>& model_presets();
std::optional<ModelPreset> find_model_preset(std::string_view name);

// Families `--arch` accepts: the architectures of model/architecture.h plus `llama3` (a llama file
// with rope base 500000 and Llama 3.2's rope_freqs).
const std::vector<std::string_view>& synth_arch_names();

// `preset` recast as family `arch` (one of synth_arch_names()), keeping its sizes and adding
// what the family's real models have: rope base and norm eps; tied output for qwen2, qwen3,
// gemma3 and llama3; a head size twice n_embd / n_head for qwen3 and gemma3 (as in Qwen3 and
// Gemma 3, so key_length differs from n_embd / n_head); for gemma3 a sliding window of
// min(512, n_ctx_train / 16) on five of every six layers (one of every two when the model has
// fewer than 6 layers, so both kinds exist) with rope base 10000 there; for gpt-oss the same
// window on every other layer, rotated as the global ones. A mixture of experts gets the
// family's recast experts (SynthFamily). Recasting to the preset's own family returns it
// unchanged.
Result<ModelPreset> preset_for_arch(const ModelPreset& preset, std::string_view arch);

// The rope_freqs.weight values of Llama 3 scaling for a head of `n_rot` rotated dimensions and
// rope base `base`, computed as llama.cpp's converter does: pair i has wavelength
// 2π·base^(2i/n_rot); wavelengths below original_context / high_freq_factor keep factor 1, above
// original_context / low_freq_factor get `factor`, and those between are interpolated smoothly.
std::vector<float> llama3_rope_factors(const Llama3RopeScaling& scaling, int64_t n_rot,
                                       double base);

// `preset` (family phi3) with LongRoPE scaling from `original_context` tokens to its context,
// as Phi-3.5-mini's files carry it; errors for other families or a context out of range.
Result<ModelPreset> with_longrope(const ModelPreset& preset, int64_t original_context);

// `preset` with YaRN rope scaling by `factor` (> 1) from an original context of
// n_ctx_train / factor tokens, as Qwen3's long-context files and gpt-oss carry it.
Result<ModelPreset> with_yarn(const ModelPreset& preset, double factor);

// Smooth LongRoPE-like factors for a synthesized model (real files carry factors searched per
// model): short ones from 1 to 2, long ones from 1 to n_ctx_train / original_context, growing
// with the pair's wavelength.
std::vector<float> longrope_factors(const LongRopeScaling& scaling, int64_t n_rot,
                                    int64_t n_ctx_train, bool long_factors);
double longrope_attn_factor(const LongRopeScaling& scaling, int64_t n_ctx_train);

}  // namespace trellis
