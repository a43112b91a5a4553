#include "model/model_presets.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <utility>

#include "model/architecture.h"
#include "model/synth_family.h"

namespace trellis {
namespace {

ModelHParams make_hparams(int64_t n_vocab, int64_t n_ctx, int64_t n_embd, int64_t n_layer,
                          int64_t n_head, int64_t n_head_kv, int64_t n_ff) {
  ModelHParams hp;
  hp.n_vocab = n_vocab;
  hp.n_ctx_train = n_ctx;
  hp.n_embd = n_embd;
  hp.n_layer = n_layer;
  hp.n_head = n_head;
  hp.n_head_kv = n_head_kv;
  hp.n_ff = n_ff;
  hp.n_rot = n_embd / n_head;
  hp.rope_freq_base = 10000.0;
  hp.rms_norm_eps = 1e-5;
  return hp;
}

// Sets the family-specific fields of `hp` (sizes stay) to what the real models of `name` (one of
// synth_families()) use. The head size is `n_embd_head` (0: n_embd / n_head).
void set_family(ModelHParams& hp, std::string_view name, int64_t n_embd_head) {
  const SynthFamily& family = *find_synth_family(name);
  hp.arch = std::string(family.architecture);
  hp.n_embd_head = n_embd_head;
  hp.n_rot = hp.head_dim();
  hp.rope_freq_scale = 1.0;
  hp.rope_yarn = false;
  hp.rope_attn_factor = 1.0;
  hp.n_ctx_orig = hp.n_ctx_train;
  hp.n_swa = 0;
  hp.swa_pattern = 1;
  hp.rms_norm_eps = family.rms_norm_eps;
  hp.rope_freq_base = family.rope_freq_base;
  // Local layers that rotate as the global ones have the global base (gpt-oss).
  hp.rope_freq_base_swa =
      find_architecture(family.architecture)->local_rope_scaled ? family.rope_freq_base : 10000.0;
}

// The experts of a mixture-of-experts family's preset.
void set_experts(ModelHParams& hp, int64_t n_expert, int64_t n_used, int64_t n_ff_exp,
                 int64_t n_ff_shexp) {
  hp.n_expert = n_expert;
  hp.n_expert_used = n_used;
  hp.n_ff_exp = n_ff_exp;
  hp.n_ff_shexp = n_ff_shexp;
  const Architecture& row = *find_architecture(hp.arch);
  hp.expert_weights_norm = row.expert_weights_norm;
  hp.expert_gating = row.expert_gating;
}

void set_longrope(ModelHParams& hp, const LongRopeScaling& scaling) {
  hp.n_ctx_orig = scaling.original_context;
  hp.rope_attn_factor = longrope_attn_factor(scaling, hp.n_ctx_train);
}

// The family's own fields of a preset: those of set_family, its output tying and its rope
// scaling (LongRoPE excepted: a phi3 preset may or may not have it).
void set_family_preset(ModelPreset& p, std::string_view name, int64_t n_embd_head) {
  const SynthFamily& family = *find_synth_family(name);
  set_family(p.hparams, name, n_embd_head);
  p.tied_output = family.tied_output;
  p.llama3_rope =
      family.llama3_rope ? std::optional<Llama3RopeScaling>(Llama3RopeScaling{}) : std::nullopt;
}

// A preset with the published shapes of a model of `family` (see set_family for n_embd_head).
ModelPreset family_preset(std::string name, std::string description, ModelHParams hp,
                          std::string_view family, int64_t n_embd_head) {
  ModelPreset p;
  p.name = std::move(name);
  p.description = std::move(description);
  p.hparams = std::move(hp);
  set_family_preset(p, family, n_embd_head);
  return p;
}

// Published configs (HF config.json): vocab, context, width, layers, heads, KV heads, n_ff, head
// size, rope base, eps and tie_word_embeddings.
ModelPreset llama32_1b() {
  return family_preset(
      "llama-3.2-1b",
      "Llama-3.2-1B shapes (llama3): 16 layers, width 2048, GQA 32/8 heads, vocab 128256",
      make_hparams(128256, 131072, 2048, 16, 32, 8, 8192), "llama3", 0);
}

ModelPreset qwen25_05b() {
  return family_preset(
      "qwen2.5-0.5b",
      "Qwen2.5-0.5B shapes (qwen2): 24 layers, width 896, GQA 14/2 heads, vocab 151936",
      make_hparams(151936, 32768, 896, 24, 14, 2, 4864), "qwen2", 0);
}

ModelPreset qwen3_06b() {
  return family_preset("qwen3-0.6b",
                       "Qwen3-0.6B shapes (qwen3): 28 layers, width 1024, GQA 16/8 heads of 128, "
                       "vocab 151936",
                       make_hparams(151936, 40960, 1024, 28, 16, 8, 3072), "qwen3", 128);
}

ModelPreset gemma3_1b() {
  ModelPreset p =
      family_preset("gemma-3-1b",
                    "Gemma-3-1B shapes (gemma3): 26 layers, width 1152, GQA 4/1 heads of 256, "
                    "window 512 on 5 of 6 layers, vocab 262144",
                    make_hparams(262144, 32768, 1152, 26, 4, 1, 6912), "gemma3", 256);
  // The 1B model has no rope scaling (the 4B-27B ones have linear x8).
  p.hparams.n_swa = 512;
  p.hparams.swa_pattern = 6;
  return p;
}

ModelPreset phi35_mini() {
  ModelPreset p =
      family_preset("phi-3.5-mini",
                    "Phi-3.5-mini shapes (phi3): 32 layers, width 3072, 32 heads (no GQA), "
                    "vocab 32064, untied output, LongRoPE from 4k to 128k",
                    make_hparams(32064, 131072, 3072, 32, 32, 32, 8192), "phi3", 0);
  p.longrope = LongRopeScaling{4096};
  set_longrope(p.hparams, *p.longrope);
  return p;
}

// A mixture of experts' preset: `family_preset` with n_expert experts of n_ff_exp, n_used per
// token, and a shared expert of n_ff_shexp (0: none).
struct ExpertShape {
  int64_t n_expert, n_used, n_ff_exp, n_ff_shexp;
};
ModelPreset moe_preset(std::string name, std::string description, ModelHParams hp,
                       std::string_view family, int64_t n_embd_head, ExpertShape experts) {
  ModelPreset p =
      family_preset(std::move(name), std::move(description), std::move(hp), family, n_embd_head);
  set_experts(p.hparams, experts.n_expert, experts.n_used, experts.n_ff_exp, experts.n_ff_shexp);
  return p;
}

ModelPreset gpt_oss_20b() {
  ModelPreset p = moe_preset("gpt-oss-20b",
                             "gpt-oss-20b shapes (gpt-oss): 24 layers, width 2880, GQA 64/8 heads "
                             "of 64, 32 experts of 2880 (4 per token), window 128 on every other "
                             "layer, YaRN x32 from 4096, vocab 201088",
                             make_hparams(201088, 131072, 2880, 24, 64, 8, 2880), "gpt-oss", 64,
                             {32, 4, 2880, 0});
  p.hparams.n_swa = 128;
  p.hparams.swa_pattern = 2;
  p.hparams.rope_yarn = true;
  p.hparams.rope_freq_scale = 1.0 / 32;
  p.hparams.n_ctx_orig = 4096;
  return p;
}

std::string_view family_of(const ModelPreset& preset) {
  return preset.llama3_rope ? std::string_view("llama3") : std::string_view(preset.hparams.arch);
}

}  // namespace

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = {
      {"tiny", "4 layers, width 128, GQA 4/2 heads, vocab 2048 (a few MB, for tests)",
       make_hparams(2048, 512, 128, 4, 4, 2, 384), false, std::nullopt, std::nullopt},
      {"tiny-wide",
       "2 layers, width 256, GQA 4/2 heads, n_ff 512, vocab 2048 (a few MB; rows of 256 fit the "
       "K-quant blocks)",
       make_hparams(2048, 512, 256, 2, 4, 2, 512), false, std::nullopt, std::nullopt},
      {"small", "12 layers, width 768, GQA 12/4 heads, vocab 32000 (~110M parameters)",
       make_hparams(32000, 2048, 768, 12, 12, 4, 2048), false, std::nullopt, std::nullopt},
      {"tinyllama-1.1b",
       "TinyLlama-1.1B shapes: 22 layers, width 2048, GQA 32/4 heads, vocab 32000",
       make_hparams(32000, 2048, 2048, 22, 32, 4, 5632), false, std::nullopt, std::nullopt},
      llama32_1b(),
      qwen25_05b(),
      qwen3_06b(),
      gemma3_1b(),
      phi35_mini(),
      moe_preset("qwen3-30b-a3b",
                 "Qwen3-30B-A3B shapes (qwen3moe): 48 layers, width 2048, GQA 32/4 heads of 128, "
                 "128 experts of 768 (8 per token), vocab 151936",
                 make_hparams(151936, 40960, 2048, 48, 32, 4, 6144), "qwen3moe", 128,
                 {128, 8, 768, 0}),
      moe_preset("qwen1.5-moe-a2.7b",
                 "Qwen1.5-MoE-A2.7B shapes (qwen2moe): 24 layers, width 2048, 16 heads, 60 "
                 "experts of 1408 (4 per token) and a shared one of 5632, vocab 151936",
                 make_hparams(151936, 8192, 2048, 24, 16, 16, 5632), "qwen2moe", 0,
                 {60, 4, 1408, 5632}),
      moe_preset("olmoe-1b-7b",
                 "OLMoE-1B-7B shapes (olmoe): 16 layers, width 2048, 16 heads, 64 experts of "
                 "1024 (8 per token), vocab 50304",
                 make_hparams(50304, 4096, 2048, 16, 16, 16, 1024), "olmoe", 0, {64, 8, 1024, 0}),
      moe_preset("mixtral-8x7b",
                 "Mixtral-8x7B shapes (mixtral): 32 layers, width 4096, GQA 32/8 heads, 8 experts "
                 "of 14336 (2 per token), vocab 32000",
                 make_hparams(32000, 32768, 4096, 32, 32, 8, 14336), "mixtral", 0,
                 {8, 2, 14336, 0}),
      gpt_oss_20b(),
  };
  return presets;
}

std::optional<ModelPreset> find_model_preset(std::string_view name) {
  for (const ModelPreset& preset : model_presets()) {
    if (preset.name == name) return preset;
  }
  return std::nullopt;
}

const std::vector<std::string_view>& synth_arch_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> out;
    for (const SynthFamily& family : synth_families()) out.push_back(family.name);
    return out;
  }();
  return names;
}

Result<ModelPreset> preset_for_arch(const ModelPreset& preset, std::string_view arch) {
  const SynthFamily* family = find_synth_family(arch);
  if (family == nullptr) {
    return Error{"unknown architecture '" + std::string(arch) + "' (" + synth_family_names() + ")"};
  }
  if (family_of(preset) == arch) return preset;
  ModelPreset out = preset;
  ModelHParams& hp = out.hparams;
  const int64_t n_embd_head =
      family->wide_heads ? (hp.n_embd_head > 0 ? hp.n_embd_head : 2 * hp.n_embd / hp.n_head) : 0;
  set_family_preset(out, arch, n_embd_head);
  out.longrope = std::nullopt;  // phi3 as Phi-3-mini-4k: plain RoPE
  const Architecture& row = *find_architecture(family->architecture);
  // Whole-vector q/k norms (OLMoE) come from models without GQA, and llama.cpp reads the k
  // norm as n_embd wide.
  if (row.qk_norm == QkNorm::WHOLE) hp.n_head_kv = hp.n_head;
  if (row.ffn_kind == FfnKind::MOE) {
    // A family without an expert_feed_forward_length key has experts of n_ff.
    const int64_t n_ff_exp = row.expert_ffn_key ? hp.n_ff / family->recast_experts_used : hp.n_ff;
    set_experts(hp, family->recast_experts, family->recast_experts_used, n_ff_exp,
                row.shared_expert ? hp.n_ff : 0);
  } else {
    set_experts(hp, 0, 0, 0, 0);
  }
  if (row.sliding_window) {
    // The family's pattern when the model has that many layers, else one local layer of two,
    // so that both kinds exist.
    hp.n_swa = static_cast<int32_t>(std::min<int64_t>(512, hp.n_ctx_train / 16));
    hp.swa_pattern = hp.n_layer >= row.default_swa_pattern ? row.default_swa_pattern : 2;
  }
  out.description = preset.description + ", as " + std::string(arch);
  return out;
}

Result<ModelPreset> with_longrope(const ModelPreset& preset, int64_t original_context) {
  const Architecture* row = find_architecture(preset.hparams.arch);
  if (row == nullptr || row->rope_factors != RopeFactors::LONGROPE) {
    return Error{"the " + preset.hparams.arch + " family has no LongRoPE factors"};
  }
  if (original_context < 1 || original_context > preset.hparams.n_ctx_train) {
    return Error{"the LongRoPE original context must be between 1 and the context (" +
                 std::to_string(preset.hparams.n_ctx_train) + ")"};
  }
  ModelPreset out = preset;
  out.longrope = LongRopeScaling{original_context};
  set_longrope(out.hparams, *out.longrope);
  return out;
}

Result<ModelPreset> with_yarn(const ModelPreset& preset, double factor) {
  const auto original =
      static_cast<int64_t>(static_cast<double>(preset.hparams.n_ctx_train) / factor);
  if (!(factor > 1.0 && factor <= 1024.0) || original < 1) {
    return Error{
        "the YaRN factor must be above 1, at most 1024 and leave an original context of "
        "at least one token"};
  }
  ModelPreset out = preset;
  out.hparams.rope_yarn = true;
  out.hparams.rope_freq_scale = 1.0 / factor;
  out.hparams.n_ctx_orig = original;
  return out;
}

std::vector<float> longrope_factors(const LongRopeScaling& scaling, int64_t n_rot,
                                    int64_t n_ctx_train, bool long_factors) {
  const double top = long_factors ? static_cast<double>(n_ctx_train) /
                                        static_cast<double>(scaling.original_context)
                                  : 2.0;
  const int64_t n_pairs = n_rot / 2;
  std::vector<float> factors;
  for (int64_t i = 0; i < n_pairs; ++i) {
    const double t = n_pairs > 1 ? static_cast<double>(i) / static_cast<double>(n_pairs - 1) : 0;
    factors.push_back(static_cast<float>(1.0 + (std::max(top, 1.0) - 1.0) * t * t));
  }
  return factors;
}

double longrope_attn_factor(const LongRopeScaling& scaling, int64_t n_ctx_train) {
  const double scale =
      static_cast<double>(n_ctx_train) / static_cast<double>(scaling.original_context);
  if (scale <= 1.0) return 1.0;
  return std::sqrt(1.0 + std::log(scale) / std::log(static_cast<double>(scaling.original_context)));
}

std::vector<float> llama3_rope_factors(const Llama3RopeScaling& scaling, int64_t n_rot,
                                       double base) {
  const double low_freq_wavelen =
      static_cast<double>(scaling.original_context) / scaling.low_freq_factor;
  const double high_freq_wavelen =
      static_cast<double>(scaling.original_context) / scaling.high_freq_factor;
  std::vector<float> factors;
  for (int64_t i = 0; i < n_rot; i += 2) {
    const double freq = 1.0 / std::pow(base, static_cast<double>(i) / static_cast<double>(n_rot));
    const double wavelen = 2.0 * std::numbers::pi / freq;
    double factor = 1.0;
    if (wavelen > low_freq_wavelen) {
      factor = scaling.factor;
    } else if (wavelen >= high_freq_wavelen) {
      const double smooth =
          (static_cast<double>(scaling.original_context) / wavelen - scaling.low_freq_factor) /
          (scaling.high_freq_factor - scaling.low_freq_factor);
      factor = 1.0 / ((1.0 - smooth) / scaling.factor + smooth);
    }
    factors.push_back(static_cast<float>(factor));
  }
  return factors;
}

}  // namespace trellis
