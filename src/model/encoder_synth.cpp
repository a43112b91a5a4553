#include "model/encoder_synth.h"

#include <array>
#include <cmath>

#include "gguf/gguf_writer.h"
#include "model/synth_layout.h"
#include "model/synth_model.h"
#include "model/synth_vocab.h"
#include "quant/quant.h"

namespace trellis {
namespace {

constexpr std::array<EncoderPreset, 5> kEncoderPresets = {{
    {"tiny", "2 layers of 128, for tests", 1000, 512, 128, 2, 4, 256},
    {"minilm", "all-MiniLM-L6-v2's shapes", 30522, 512, 384, 6, 12, 1536},
    {"bge-small", "bge-small-en-v1.5's shapes", 30522, 512, 384, 12, 12, 1536},
    {"bge-base", "bge-base-en-v1.5's shapes", 30522, 512, 768, 12, 12, 3072},
    {"nomic-embed", "nomic-embed-text-v1.5's shapes", 30522, 2048, 768, 12, 12, 3072},
}};

constexpr int64_t kTokenTypes = 2;
constexpr double kNomicRopeBase = 1000.0;

DType matrix_type(DType requested, int64_t row_length) {
  return row_bytes(requested, row_length).has_value() ? requested : DType::F16;
}

void set_encoder_metadata(GgufWriter& writer, const EncoderSynthOptions& options) {
  const EncoderPreset& p = *options.preset;
  const std::string arch(options.family->name);
  writer.set("general.architecture", GgufValue{arch});
  writer.set("general.name", GgufValue{"trellis-synth-" + std::string(p.name)});
  writer.set(arch + ".context_length", GgufValue{static_cast<uint32_t>(p.n_ctx)});
  writer.set(arch + ".embedding_length", GgufValue{static_cast<uint32_t>(p.n_embd)});
  writer.set(arch + ".feed_forward_length", GgufValue{static_cast<uint32_t>(p.n_ff)});
  writer.set(arch + ".block_count", GgufValue{static_cast<uint32_t>(p.n_layer)});
  writer.set(arch + ".attention.head_count", GgufValue{static_cast<uint32_t>(p.n_head)});
  writer.set(arch + ".attention.layer_norm_epsilon", GgufValue{1e-12f});
  writer.set(arch + ".attention.causal", GgufValue{false});
  writer.set(arch + ".pooling_type", GgufValue{static_cast<uint32_t>(options.pooling)});
  if (!options.family->absolute_positions) {
    writer.set(arch + ".rope.freq_base", GgufValue{static_cast<float>(kNomicRopeBase)});
  }
  if (options.pooling == Pooling::RANK) {
    writer.set(arch + ".classifier.output_labels", gguf_string_array({"LABEL_0"}));
  }
  const Vocab vocab = make_synth_wordpiece_vocab(static_cast<int32_t>(p.n_vocab));
  set_vocab_metadata(writer, vocab);
  // A query-document pair is [CLS] query [SEP] document [SEP]: the separator after the query is
  // the end-of-text token, not a second one (llama.cpp reads add_sep_token so too).
  writer.set("tokenizer.ggml.seperator_token_id", GgufValue{static_cast<uint32_t>(vocab.eos_id)});
  writer.set("tokenizer.ggml.padding_token_id", GgufValue{static_cast<uint32_t>(vocab.pad_id)});
  writer.set("tokenizer.ggml.add_sep_token", GgufValue{false});
  writer.set("tokenizer.ggml.token_type_count", GgufValue{static_cast<uint32_t>(kTokenTypes)});
}

std::vector<SynthTensor> encoder_tensor_list(const EncoderSynthOptions& options) {
  const EncoderPreset& p = *options.preset;
  const int64_t d = p.n_embd;
  std::vector<SynthTensor> out;
  // Projections are drawn with σ = 1/√n_in, so that each keeps its input's scale: attention
  // then mixes the rows and the head's score varies with the input, as in a trained model (with
  // the decoders' σ = 0.02 every input would get nearly the same vector).
  auto matrix = [&](std::string name, int64_t n_in, int64_t n_out) {
    out.push_back({std::move(name),
                   matrix_type(options.type, n_in),
                   {n_in, n_out},
                   SynthFill::NORMAL,
                   {},
                   1.0f / std::sqrt(static_cast<float>(n_in))});
  };
  // The embeddings: rows that LayerNorm scales to unit variance anyway.
  auto table = [&](std::string name, int64_t n_in, int64_t n_out) {
    out.push_back(
        {std::move(name), matrix_type(options.type, n_in), {n_in, n_out}, SynthFill::NORMAL, {}});
  };
  auto vector = [&](std::string name, int64_t n, SynthFill fill) {
    out.push_back({std::move(name), DType::F32, {n}, fill, {}});
  };
  table("token_embd.weight", d, p.n_vocab);
  out.push_back({"token_types.weight", DType::F32, {d, kTokenTypes}, SynthFill::NORMAL, {}});
  if (options.family->absolute_positions) table("position_embd.weight", d, p.n_ctx);
  vector("token_embd_norm.weight", d, SynthFill::ONES);
  vector("token_embd_norm.bias", d, SynthFill::NORMAL);
  for (int64_t il = 0; il < p.n_layer; ++il) {
    const std::string blk = "blk." + std::to_string(il) + ".";
    if (options.family->gated_ffn) {  // nomic-bert: fused projections, no biases
      matrix(blk + "attn_qkv.weight", d, 3 * d);
    } else {
      for (const char* name : {"attn_q", "attn_k", "attn_v"}) {
        matrix(blk + name + ".weight", d, d);
        vector(blk + name + ".bias", d, SynthFill::NORMAL);
      }
    }
    matrix(blk + "attn_output.weight", d, d);
    if (!options.family->gated_ffn) vector(blk + "attn_output.bias", d, SynthFill::NORMAL);
    vector(blk + "attn_output_norm.weight", d, SynthFill::ONES);
    vector(blk + "attn_output_norm.bias", d, SynthFill::NORMAL);
    matrix(blk + "ffn_up.weight", d, p.n_ff);
    if (options.family->gated_ffn) {
      matrix(blk + "ffn_gate.weight", d, p.n_ff);
    } else {
      vector(blk + "ffn_up.bias", p.n_ff, SynthFill::NORMAL);
    }
    matrix(blk + "ffn_down.weight", p.n_ff, d);
    if (!options.family->gated_ffn) vector(blk + "ffn_down.bias", d, SynthFill::NORMAL);
    vector(blk + "layer_output_norm.weight", d, SynthFill::ONES);
    vector(blk + "layer_output_norm.bias", d, SynthFill::NORMAL);
  }
  if (options.pooling == Pooling::RANK) {
    matrix("cls.weight", d, d);
    vector("cls.bias", d, SynthFill::NORMAL);
    // One score per pair: a matrix of a single row stays f32 (no block type fits it better).
    out.push_back({"cls.output.weight",
                   DType::F32,
                   {d, 1},
                   SynthFill::NORMAL,
                   {},
                   1.0f / std::sqrt(static_cast<float>(d))});
    vector("cls.output.bias", 1, SynthFill::NORMAL);
  }
  return out;
}

}  // namespace

std::span<const EncoderPreset> encoder_presets() {
  return kEncoderPresets;
}

const EncoderPreset* find_encoder_preset(std::string_view name) {
  for (const EncoderPreset& p : kEncoderPresets) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::string encoder_preset_names() {
  std::string out;
  for (const EncoderPreset& p : kEncoderPresets) {
    out += (out.empty() ? "" : ", ") + std::string(p.name);
  }
  return out;
}

Status synthesize_encoder(const EncoderSynthOptions& options) {
  if (options.preset == nullptr || options.family == nullptr) {
    return Error{"model synth: an encoder needs a preset and a family"};
  }
  if (options.pooling == Pooling::NONE) {
    return Error{"model synth: an encoder needs a pooling (mean, cls, last or rank)"};
  }
  if (!is_synth_type(options.type)) {
    return Error{"model synth: type " + std::string(dtype_name(options.type)) +
                 " is not supported"};
  }
  GgufWriter writer;
  set_encoder_metadata(writer, options);
  writer.set("general.file_type", GgufValue{file_type_code(options.type)});
  return write_synth_tensors(
      writer, encoder_tensor_list(options),
      {options.seed, options.output_path, options.n_threads, options.show_progress});
}

}  // namespace trellis
