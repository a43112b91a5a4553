#include "model/llama_hparams.h"

#include "gguf/gguf_file.h"

namespace trellis {
namespace {

Result<int64_t> positive_int(const GgufFile& file, const std::string& key) {
  Result<int64_t> value = file.get_int(key);
  if (!value.ok()) return value.error();
  if (*value <= 0)
    return Error{file.name() + ": " + key + " must be positive, got " + std::to_string(*value)};
  return value;
}

Result<int64_t> vocab_size(const GgufFile& file) {
  if (file.has("llama.vocab_size")) return positive_int(file, "llama.vocab_size");
  Result<const GgufArray*> tokens = file.get_array("tokenizer.ggml.tokens");
  if (!tokens.ok())
    return Error{file.name() + ": no llama.vocab_size and no tokenizer.ggml.tokens"};
  return static_cast<int64_t>((*tokens)->items.size());
}

}  // namespace

Result<LlamaHParams> read_llama_hparams(const GgufFile& file) {
  Result<std::string> arch = file.get_string("general.architecture");
  if (!arch.ok()) return arch.error();
  if (*arch != "llama") {
    return Error{file.name() + ": unsupported architecture '" + *arch + "' (supported: llama)"};
  }
  LlamaHParams hp;
  auto read = [&](const char* key, int64_t* out) -> Status {
    Result<int64_t> value = positive_int(file, key);
    if (!value.ok()) return value.error();
    *out = *value;
    return {};
  };
  TRELLIS_TRY(read("llama.context_length", &hp.n_ctx_train));
  TRELLIS_TRY(read("llama.embedding_length", &hp.n_embd));
  TRELLIS_TRY(read("llama.block_count", &hp.n_layer));
  TRELLIS_TRY(read("llama.feed_forward_length", &hp.n_ff));
  TRELLIS_TRY(read("llama.attention.head_count", &hp.n_head));
  Result<int64_t> n_head_kv = file.get_int_or("llama.attention.head_count_kv", hp.n_head);
  if (!n_head_kv.ok()) return n_head_kv.error();
  hp.n_head_kv = *n_head_kv;
  Result<int64_t> n_vocab = vocab_size(file);
  if (!n_vocab.ok()) return n_vocab.error();
  hp.n_vocab = *n_vocab;

  auto invalid = [&](const std::string& what) { return Error{file.name() + ": " + what}; };
  if (hp.n_embd % hp.n_head != 0)
    return invalid("embedding_length is not a multiple of head_count");
  if (hp.n_head_kv <= 0 || hp.n_head % hp.n_head_kv != 0)
    return invalid("head_count is not a multiple of head_count_kv");

  Result<int64_t> n_rot = file.get_int_or("llama.rope.dimension_count", hp.head_dim());
  if (!n_rot.ok()) return n_rot.error();
  hp.n_rot = *n_rot;
  if (hp.n_rot <= 0 || hp.n_rot > hp.head_dim() || hp.n_rot % 2 != 0)
    return invalid("rope.dimension_count must be even and at most the head size");

  Result<double> base = file.get_float_or("llama.rope.freq_base", 10000.0);
  Result<double> scale = file.get_float_or("llama.rope.scale_linear", 1.0);
  Result<double> eps = file.get_float_or("llama.attention.layer_norm_rms_epsilon", 1e-5);
  if (!base.ok()) return base.error();
  if (!scale.ok()) return scale.error();
  if (!eps.ok()) return eps.error();
  if (*base <= 0 || *scale <= 0 || *eps <= 0)
    return invalid("rope/norm parameters must be positive");
  hp.rope_freq_base = *base;
  hp.rope_freq_scale = 1.0 / *scale;
  hp.rms_norm_eps = *eps;
  return hp;
}

}  // namespace trellis
