#include "model/encoder_hparams.h"

#include <array>

#include "gguf/gguf_file.h"

namespace trellis {
namespace {

constexpr std::array<EncoderFamily, 2> kEncoderFamilies = {{
    {.name = "bert"},
    {.name = "nomic-bert", .absolute_positions = false, .gated_ffn = true},
}};

Status require_positive(const GgufFile& file, std::string_view key, int64_t value) {
  if (value > 0) return {};
  return Error{file.name() + ": " + std::string(key) + " must be positive, got " +
               std::to_string(value)};
}

}  // namespace

std::span<const EncoderFamily> encoder_families() {
  return kEncoderFamilies;
}

const EncoderFamily* find_encoder_family(std::string_view name) {
  for (const EncoderFamily& f : kEncoderFamilies) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::string encoder_family_names() {
  std::string out;
  for (const EncoderFamily& f : kEncoderFamilies)
    out += (out.empty() ? "" : ", ") + std::string(f.name);
  return out;
}

Result<EncoderHParams> read_encoder_hparams(const GgufFile& file) {
  Result<std::string> arch = file.get_string("general.architecture");
  if (!arch.ok()) return arch.error();
  EncoderHParams hp;
  hp.family = find_encoder_family(*arch);
  if (hp.family == nullptr) {
    return Error{file.name() + ": '" + *arch + "' is not an encoder architecture (" +
                 encoder_family_names() + ")"};
  }
  const std::string p = *arch + ".";
  auto get = [&](const std::string& key, int64_t& out) -> Status {
    Result<int64_t> v = file.get_int(p + key);
    if (!v.ok()) return v.error();
    out = *v;
    return require_positive(file, p + key, out);
  };
  TRELLIS_TRY(get("context_length", hp.n_ctx_train));
  TRELLIS_TRY(get("embedding_length", hp.n_embd));
  TRELLIS_TRY(get("block_count", hp.n_layer));
  TRELLIS_TRY(get("attention.head_count", hp.n_head));
  TRELLIS_TRY(get("feed_forward_length", hp.n_ff));
  if (hp.n_embd % hp.n_head != 0) {
    return Error{file.name() + ": embedding_length " + std::to_string(hp.n_embd) +
                 " is not a multiple of attention.head_count " + std::to_string(hp.n_head)};
  }
  Result<int64_t> n_head_kv = file.get_int_or(p + "attention.head_count_kv", hp.n_head);
  if (!n_head_kv.ok()) return n_head_kv.error();
  if (*n_head_kv != hp.n_head) {
    return Error{file.name() + ": encoders with grouped key/value heads are not supported"};
  }
  Result<double> eps = file.get_float(p + "attention.layer_norm_epsilon");
  if (!eps.ok()) return eps.error();
  hp.norm_eps = *eps;
  Result<bool> causal = file.get_bool_or(p + "attention.causal", false);
  if (!causal.ok()) return causal.error();
  if (*causal) return Error{file.name() + ": a causal " + *arch + " model is not supported"};

  Result<double> base = file.get_float_or(p + "rope.freq_base", 10000.0);
  if (!base.ok()) return base.error();
  hp.rope_freq_base = *base;
  Result<int64_t> n_rot = file.get_int_or(p + "rope.dimension_count", hp.head_dim());
  if (!n_rot.ok()) return n_rot.error();
  if (*n_rot <= 0 || *n_rot > hp.head_dim() || *n_rot % 2 != 0) {
    return Error{file.name() + ": rope.dimension_count " + std::to_string(*n_rot) +
                 " must be even and within the head size"};
  }
  hp.n_rot = *n_rot;

  Result<int64_t> types = file.get_int_or("tokenizer.ggml.token_type_count", 0);
  if (!types.ok()) return types.error();
  hp.n_token_types = *types;
  Result<int64_t> pooling =
      file.get_int_or(p + "pooling_type", static_cast<int64_t>(Pooling::MEAN));
  if (!pooling.ok()) return pooling.error();
  std::optional<Pooling> kind = pooling_from_code(*pooling);
  if (!kind.has_value() || *kind == Pooling::NONE) {
    return Error{file.name() + ": pooling_type " + std::to_string(*pooling) +
                 " is not one we serve (1 mean, 2 cls, 3 last, 4 rank)"};
  }
  hp.pooling = *kind;
  hp.n_cls_out = 1;
  Result<const GgufArray*> labels = file.get_array(p + "classifier.output_labels");
  if (labels.ok() && !(*labels)->items.empty()) {
    hp.n_cls_out = static_cast<int64_t>((*labels)->items.size());
  }

  Result<const GgufArray*> tokens = file.get_array("tokenizer.ggml.tokens");
  if (!tokens.ok()) return tokens.error();
  hp.n_vocab = static_cast<int64_t>((*tokens)->items.size());
  TRELLIS_TRY(require_positive(file, "the vocab size", hp.n_vocab));
  return hp;
}

}  // namespace trellis
