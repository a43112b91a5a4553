#include "model/synth_layout.h"

#include <cassert>

#include "gguf/gguf_writer.h"
#include "model/architecture.h"
#include "quant/quant.h"

namespace trellis {
namespace {

DType weight_type(DType requested, int64_t row_length) {
  return row_bytes(requested, row_length).has_value() ? requested : DType::F16;
}

}  // namespace

std::vector<SynthTensor> synth_tensor_list(const ModelPreset& preset, DType type) {
  const ModelHParams& hp = preset.hparams;
  const Architecture* arch = find_architecture(hp.arch);
  assert(arch != nullptr);
  auto matrix = [&](std::string name, int64_t cols, int64_t rows) {
    return SynthTensor{
        std::move(name), weight_type(type, cols), {cols, rows}, SynthFill::NORMAL, {}};
  };
  auto vector = [](std::string name, int64_t n, SynthFill fill) {
    return SynthTensor{std::move(name), DType::F32, {n}, fill, {}};
  };
  const int64_t n_embd = hp.n_embd;
  const int64_t n_q = hp.n_embd_q();
  const int64_t n_kv = hp.n_embd_kv();
  std::vector<SynthTensor> list;
  list.push_back(matrix("token_embd.weight", n_embd, hp.n_vocab));
  for (int64_t layer = 0; layer < hp.n_layer; ++layer) {
    const std::string p = "blk." + std::to_string(layer) + ".";
    list.push_back(vector(p + "attn_norm.weight", n_embd, SynthFill::ONES));
    if (arch->fused_qkv) {
      list.push_back(matrix(p + "attn_qkv.weight", n_embd, n_q + 2 * n_kv));
    } else {
      list.push_back(matrix(p + "attn_q.weight", n_embd, n_q));
      list.push_back(matrix(p + "attn_k.weight", n_embd, n_kv));
      list.push_back(matrix(p + "attn_v.weight", n_embd, n_kv));
    }
    if (arch->qkv_bias) {
      list.push_back(vector(p + "attn_q.bias", n_q, SynthFill::NORMAL));
      list.push_back(vector(p + "attn_k.bias", n_kv, SynthFill::NORMAL));
      list.push_back(vector(p + "attn_v.bias", n_kv, SynthFill::NORMAL));
    }
    if (arch->qk_norm) {
      list.push_back(vector(p + "attn_q_norm.weight", hp.head_dim(), SynthFill::ONES));
      list.push_back(vector(p + "attn_k_norm.weight", hp.head_dim(), SynthFill::ONES));
    }
    list.push_back(matrix(p + "attn_output.weight", n_q, n_embd));
    if (arch->post_norms) {
      list.push_back(vector(p + "post_attention_norm.weight", n_embd, SynthFill::ONES));
    }
    list.push_back(vector(p + "ffn_norm.weight", n_embd, SynthFill::ONES));
    if (arch->fused_gate_up) {
      list.push_back(matrix(p + "ffn_up.weight", n_embd, 2 * hp.n_ff));
    } else {
      list.push_back(matrix(p + "ffn_gate.weight", n_embd, hp.n_ff));
      list.push_back(matrix(p + "ffn_up.weight", n_embd, hp.n_ff));
    }
    list.push_back(matrix(p + "ffn_down.weight", hp.n_ff, n_embd));
    if (arch->post_norms) {
      list.push_back(vector(p + "post_ffw_norm.weight", n_embd, SynthFill::ONES));
    }
  }
  list.push_back(vector("output_norm.weight", n_embd, SynthFill::ONES));
  if (!preset.tied_output) list.push_back(matrix("output.weight", n_embd, hp.n_vocab));
  if (preset.llama3_rope) {
    SynthTensor freqs = vector("rope_freqs.weight", hp.n_rot / 2, SynthFill::VALUES);
    freqs.values = llama3_rope_factors(*preset.llama3_rope, hp.n_rot, hp.rope_freq_base);
    list.push_back(std::move(freqs));
  }
  if (preset.longrope) {
    for (bool long_factors : {false, true}) {
      SynthTensor factors =
          vector(long_factors ? "rope_factors_long.weight" : "rope_factors_short.weight",
                 hp.n_rot / 2, SynthFill::VALUES);
      factors.values = longrope_factors(*preset.longrope, hp.n_rot, hp.n_ctx_train, long_factors);
      list.push_back(std::move(factors));
    }
  }
  return list;
}

void set_arch_metadata(GgufWriter& writer, const ModelPreset& preset) {
  const ModelHParams& hp = preset.hparams;
  const Architecture* arch = find_architecture(hp.arch);
  assert(arch != nullptr);
  const std::string p = hp.arch + ".";
  auto u32 = [](int64_t v) { return GgufValue{static_cast<uint32_t>(v)}; };
  auto f32 = [](double v) { return GgufValue{static_cast<float>(v)}; };
  writer.set("general.architecture", GgufValue{hp.arch});
  writer.set(p + "vocab_size", u32(hp.n_vocab));
  writer.set(p + "context_length", u32(hp.n_ctx_train));
  writer.set(p + "embedding_length", u32(hp.n_embd));
  writer.set(p + "block_count", u32(hp.n_layer));
  writer.set(p + "feed_forward_length", u32(hp.n_ff));
  writer.set(p + "rope.dimension_count", u32(hp.n_rot));
  writer.set(p + "attention.head_count", u32(hp.n_head));
  writer.set(p + "attention.head_count_kv", u32(hp.n_head_kv));
  writer.set(p + "attention.layer_norm_rms_epsilon", f32(hp.rms_norm_eps));
  writer.set(p + "rope.freq_base", f32(hp.rope_freq_base));
  if (hp.n_embd % hp.n_head != 0 || hp.head_dim() != hp.n_embd / hp.n_head) {
    writer.set(p + "attention.key_length", u32(hp.head_dim()));
    writer.set(p + "attention.value_length", u32(hp.head_dim()));
  }
  if (hp.rope_freq_scale != 1.0) {
    writer.set(p + "rope.scaling.type", GgufValue{std::string("linear")});
    writer.set(p + "rope.scaling.factor", f32(1.0 / hp.rope_freq_scale));
  }
  if (preset.longrope) {
    writer.set(p + "rope.scaling.attn_factor", f32(hp.rope_attn_factor));
    writer.set(p + "rope.scaling.original_context_length", u32(hp.n_ctx_orig));
  }
  if (arch->sliding_window) {
    writer.set(p + "attention.sliding_window", u32(hp.n_swa));
    writer.set(p + "attention.sliding_window_pattern", u32(hp.swa_pattern));
    writer.set(p + "rope.freq_base_swa", f32(hp.rope_freq_base_swa));
  }
}

}  // namespace trellis
