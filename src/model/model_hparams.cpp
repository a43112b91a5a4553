#include "model/model_hparams.h"

#include <cstdint>

#include "gguf/gguf_file.h"
#include "model/architecture.h"
#include "model/family_keys.h"

namespace trellis {
namespace {

Result<int64_t> positive_int(const GgufFile& file, const std::string& key) {
  Result<int64_t> value = file.get_int(key);
  if (!value.ok()) return value.error();
  if (*value <= 0)
    return Error{file.name() + ": " + key + " must be positive, got " + std::to_string(*value)};
  return value;
}

Result<int64_t> vocab_size(const GgufFile& file, const std::string& key) {
  if (file.has(key)) return positive_int(file, key);
  Result<const GgufArray*> tokens = file.get_array("tokenizer.ggml.tokens");
  if (!tokens.ok()) return Error{file.name() + ": no " + key + " and no tokenizer.ggml.tokens"};
  return static_cast<int64_t>((*tokens)->items.size());
}

// The rope scaling factor: rope.scaling.factor (with rope.scaling.type linear, yarn or absent),
// else the older rope.scale_linear, else 1; *yarn says whether it is YaRN. Other scaling types
// are refused by name.
Result<double> rope_scale_factor(const GgufFile& file, const Architecture& arch, bool* yarn) {
  Result<std::string> type =
      file.get_string_or(key_name(arch, HParamKey::ROPE_SCALING_TYPE), "none");
  if (!type.ok()) return type.error();
  if (*type != "none" && *type != "linear" && *type != "yarn") {
    return Error{file.name() + ": rope scaling '" + *type +
                 "' is not supported (none, linear, yarn)"};
  }
  *yarn = *type == "yarn";
  Result<double> legacy = file.get_float_or(key_name(arch, HParamKey::ROPE_SCALE_LINEAR), 1.0);
  if (!legacy.ok()) return legacy.error();
  if (*type == "none") return legacy;
  return file.get_float_or(key_name(arch, HParamKey::ROPE_SCALING_FACTOR), *legacy);
}

// Every key the family requires is there, or the file is refused naming the first one missing.
Status check_required_keys(const GgufFile& file, const Architecture& arch) {
  for (const KeySpec& spec : family_keys(arch)) {
    if (spec.presence != Presence::REQUIRED) continue;
    const std::string name = key_name(arch, spec.key);
    if (!file.has(name)) {
      return Error{file.name() + ": missing metadata key '" + name + "' (required by the " +
                   std::string(arch.name) + " architecture)"};
    }
  }
  return {};
}

// llama.cpp's expert_gating_func codes.
int64_t gating_code(ExpertGating gating) {
  return gating == ExpertGating::SOFTMAX_WEIGHT ? 3 : 1;
}

// The routing keys other mixtures of experts carry (DeepSeek's, Llama 4's ...): a file that sets
// one to what its family does not do is refused by the key's name, never run as something else.
Status refuse_other_routing(const GgufFile& file, const Architecture& arch) {
  const std::string prefix = std::string(file_architecture(arch)) + ".";
  auto refuse = [&](const std::string& key, const std::string& value, const std::string& why) {
    return Error{file.name() + ": " + prefix + key + " = " + value + " is not supported (" + why +
                 ")"};
  };
  int64_t dense = 0;
  TRELLIS_ASSIGN(dense, file.get_int_or(prefix + "leading_dense_block_count", 0));
  if (dense != 0)
    return refuse("leading_dense_block_count", std::to_string(dense),
                  "dense layers before the experts");
  int64_t shared = 0;
  TRELLIS_ASSIGN(shared,
                 file.get_int_or(prefix + "expert_shared_count", arch.shared_expert ? 1 : 0));
  if (shared != (arch.shared_expert ? 1 : 0)) {
    return refuse("expert_shared_count", std::to_string(shared),
                  "the " + std::string(arch.name) + " family has " +
                      (arch.shared_expert ? "one shared expert" : "no shared expert"));
  }
  double scale = 0;
  TRELLIS_ASSIGN(scale, file.get_float_or(prefix + "expert_weights_scale", 0.0));
  if (scale != 0.0 && scale != 1.0)
    return refuse("expert_weights_scale", std::to_string(scale), "routing weights are not scaled");
  const int64_t own_gating = gating_code(arch.expert_gating);
  int64_t gating = 0;
  TRELLIS_ASSIGN(gating, file.get_int_or(prefix + "expert_gating_func", own_gating));
  if (gating != own_gating) {
    return refuse("expert_gating_func", std::to_string(gating),
                  "the " + std::string(arch.name) + " family gates with " +
                      std::to_string(own_gating) +
                      (own_gating == 3 ? ", a softmax over the chosen scores"
                                       : ", a softmax over all experts"));
  }
  bool norm = false;
  TRELLIS_ASSIGN(norm, file.get_bool_or(prefix + "expert_weights_norm", arch.expert_weights_norm));
  if (norm != arch.expert_weights_norm) {
    return refuse("expert_weights_norm", norm ? "true" : "false",
                  std::string("the ") + std::string(arch.name) + " family " +
                      (arch.expert_weights_norm ? "renormalizes" : "does not renormalize") +
                      " the chosen experts' weights");
  }
  return {};
}

// The keys of a mixture of experts, as llama.cpp reads them for these families.
Status read_expert_keys(const GgufFile& file, const Architecture& arch, ModelHParams& hp) {
  auto key = [&](HParamKey k) { return key_name(arch, k); };
  auto invalid = [&](const std::string& what) { return Error{file.name() + ": " + what}; };
  TRELLIS_ASSIGN(hp.n_expert, positive_int(file, key(HParamKey::EXPERT_COUNT)));
  TRELLIS_ASSIGN(hp.n_expert_used, positive_int(file, key(HParamKey::EXPERT_USED_COUNT)));
  if (hp.n_expert > kMaxExperts || hp.n_expert_used > hp.n_expert) {
    return invalid(key(HParamKey::EXPERT_USED_COUNT) + " must be at most expert_count, " +
                   "itself at most " + std::to_string(kMaxExperts));
  }
  hp.n_ff_exp = hp.n_ff;
  if (arch.expert_ffn_key) {  // without the key, n_ff / expert_used_count
    TRELLIS_ASSIGN(hp.n_ff_exp, file.get_int_or(key(HParamKey::EXPERT_FEED_FORWARD_LENGTH),
                                                hp.n_ff / hp.n_expert_used));
  }
  if (arch.shared_expert) {
    TRELLIS_ASSIGN(hp.n_ff_shexp,
                   file.get_int_or(key(HParamKey::EXPERT_SHARED_FEED_FORWARD_LENGTH), hp.n_ff));
  }
  if (hp.n_ff_exp <= 0 || (arch.shared_expert && hp.n_ff_shexp <= 0))
    return invalid("the experts' feed_forward_length must be positive");
  hp.expert_weights_norm = arch.expert_weights_norm;
  hp.expert_gating = arch.expert_gating;
  return refuse_other_routing(file, arch);
}

}  // namespace

Result<ModelHParams> read_model_hparams(const GgufFile& file) {
  Result<std::string> arch_name = file.get_string("general.architecture");
  if (!arch_name.ok()) return arch_name.error();
  Result<int64_t> n_expert = file.get_int_or(*arch_name + ".expert_count", 0);
  if (!n_expert.ok()) return n_expert.error();
  const Architecture* arch = find_file_architecture(*arch_name, *n_expert);
  if (arch == nullptr) {
    return Error{file.name() + ": unsupported architecture '" + *arch_name +
                 "' (supported: " + supported_architectures() + ")"};
  }
  TRELLIS_TRY(check_required_keys(file, *arch));
  ModelHParams hp;
  hp.arch = std::string(arch->name);
  auto key = [&](HParamKey k) { return key_name(*arch, k); };
  auto read = [&](HParamKey k, int64_t* out) -> Status {
    Result<int64_t> value = positive_int(file, key(k));
    if (!value.ok()) return value.error();
    *out = *value;
    return {};
  };
  TRELLIS_TRY(read(HParamKey::CONTEXT_LENGTH, &hp.n_ctx_train));
  TRELLIS_TRY(read(HParamKey::EMBEDDING_LENGTH, &hp.n_embd));
  TRELLIS_TRY(read(HParamKey::BLOCK_COUNT, &hp.n_layer));
  TRELLIS_TRY(read(HParamKey::FEED_FORWARD_LENGTH, &hp.n_ff));
  TRELLIS_TRY(read(HParamKey::HEAD_COUNT, &hp.n_head));
  Result<int64_t> n_head_kv = file.get_int_or(key(HParamKey::HEAD_COUNT_KV), hp.n_head);
  if (!n_head_kv.ok()) return n_head_kv.error();
  hp.n_head_kv = *n_head_kv;
  Result<int64_t> n_vocab = vocab_size(file, key(HParamKey::VOCAB_SIZE));
  if (!n_vocab.ok()) return n_vocab.error();
  hp.n_vocab = *n_vocab;

  auto invalid = [&](const std::string& what) { return Error{file.name() + ": " + what}; };
  if (hp.n_head_kv <= 0 || hp.n_head % hp.n_head_kv != 0)
    return invalid("head_count is not a multiple of head_count_kv");
  Result<int64_t> key_length = file.get_int_or(key(HParamKey::KEY_LENGTH), 0);
  if (!key_length.ok()) return key_length.error();
  Result<int64_t> value_length = file.get_int_or(key(HParamKey::VALUE_LENGTH), *key_length);
  if (!value_length.ok()) return value_length.error();
  if (*key_length < 0 || *value_length != *key_length)
    return invalid("attention.key_length and value_length must be equal and positive");
  hp.n_embd_head = *key_length;
  if (hp.n_embd_head == 0 && hp.n_embd % hp.n_head != 0)
    return invalid("embedding_length is not a multiple of head_count");

  Result<int64_t> n_rot = file.get_int_or(key(HParamKey::ROPE_DIMENSION_COUNT), hp.head_dim());
  if (!n_rot.ok()) return n_rot.error();
  hp.n_rot = *n_rot;
  if (hp.n_rot <= 0 || hp.n_rot > hp.head_dim() || hp.n_rot % 2 != 0)
    return invalid("rope.dimension_count must be even and at most the head size");

  Result<double> base = file.get_float_or(key(HParamKey::ROPE_FREQ_BASE), 10000.0);
  Result<double> factor = rope_scale_factor(file, *arch, &hp.rope_yarn);
  Result<double> eps = file.get_float_or(key(HParamKey::RMS_EPS), 1e-5);
  if (!base.ok()) return base.error();
  if (!factor.ok()) return factor.error();
  if (!eps.ok()) return eps.error();
  if (*base <= 0 || *factor <= 0 || *eps <= 0)
    return invalid("rope/norm parameters must be positive");
  hp.rope_freq_base = *base;
  hp.rope_freq_scale = 1.0 / *factor;
  hp.rms_norm_eps = *eps;
  Result<double> attn_factor = file.get_float_or(key(HParamKey::ROPE_ATTN_FACTOR), 1.0);
  Result<int64_t> n_ctx_orig =
      file.get_int_or(key(HParamKey::ROPE_ORIGINAL_CONTEXT), hp.n_ctx_train);
  if (!attn_factor.ok()) return attn_factor.error();
  if (!n_ctx_orig.ok()) return n_ctx_orig.error();
  if (!(*attn_factor > 0 && *attn_factor < 1e3) || *n_ctx_orig <= 0)
    return invalid("rope.scaling.attn_factor and original_context_length must be positive");
  hp.rope_attn_factor = *attn_factor;
  hp.n_ctx_orig = *n_ctx_orig;

  if (arch->sliding_window) {
    Result<int64_t> window = file.get_int_or(key(HParamKey::SLIDING_WINDOW), 0);
    Result<int64_t> pattern =
        file.get_int_or(key(HParamKey::SLIDING_WINDOW_PATTERN), arch->default_swa_pattern);
    // Local layers that rotate as the global ones default to the global base (gpt-oss).
    Result<double> base_swa = file.get_float_or(
        key(HParamKey::ROPE_FREQ_BASE_SWA), arch->local_rope_scaled ? hp.rope_freq_base : 10000.0);
    if (!window.ok()) return window.error();
    if (!pattern.ok()) return pattern.error();
    if (!base_swa.ok()) return base_swa.error();
    if (*window < 0 || *window > INT32_MAX || *pattern < 1 || *pattern > INT32_MAX ||
        *base_swa <= 0)
      return invalid("sliding window, its pattern and rope.freq_base_swa must be positive");
    hp.n_swa = static_cast<int32_t>(*window);
    hp.swa_pattern = static_cast<int32_t>(*pattern);
    hp.rope_freq_base_swa = *base_swa;
  }
  if (arch->width_query_scale_layers > 0 && hp.n_layer == arch->width_query_scale_layers)
    hp.query_scale_dim = hp.n_embd / hp.n_head;
  if (arch->ffn_kind == FfnKind::MOE) TRELLIS_TRY(read_expert_keys(file, *arch, hp));
  return hp;
}

}  // namespace trellis
