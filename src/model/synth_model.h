// Writes a GGUF of any supported family (the preset's hparams.arch, see model_presets.h) with
// deterministic random weights, streamed to disk.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/result.h"
#include "model/model_presets.h"
#include "model/pooling.h"
#include "model/quant_mix.h"
#include "model/synth_layout.h"
#include "tensor/dtype.h"
#include "tokenizer/vocab.h"

namespace trellis {

struct SynthOptions {
  ModelPreset preset;
  DType type = DType::Q4_0;  // weight matrices; norms are always f32
  uint64_t seed = 0;
  std::string vocab_from;  // GGUF whose tokenizer.* metadata is copied; empty: the built-in vocab
  std::string output_path;
  int n_threads = 0;  // 0: all cores
  bool show_progress = true;
  // A llama.cpp-style mix instead of one type (model/quant_mix.h): each matrix gets the mix's
  // type for it (`type` must then be the mix's base).
  std::optional<QuantMix> mix = std::nullopt;
  // With the built-in vocab: write tokenizer.chat_template, the format of the preset's real chat
  // models (model/preset_chat_templates.h). A copied tokenizer (vocab_from) keeps its own, if any.
  bool chat_template = true;
  // An embedding model (LAST: ARCH.pooling_type, the last token's hidden state is the vector) or
  // a reranker (RANK: also cls.output.weight, the "yes" and "no" rows of a yes/no classifier, and
  // tokenizer.chat_template.rerank, the prompt a query and a document fill), as llama.cpp's
  // converter writes Qwen3-Embedding and Qwen3-Reranker. Unset: a generative model.
  std::optional<Pooling> pooling = std::nullopt;
};

// The prompt of synthesized rerankers, {query} and {document} replaced by the pair's texts: the
// shape of Qwen3-Reranker's, in words of the built-in vocab.
inline constexpr std::string_view kSynthRerankTemplate =
    "Judge whether the document answers the query. Answer yes or no.\nQuery: {query}\n"
    "Document: {document}\nAnswer:";

// Weight types synthesis supports: those quantize_row can write (f32, f16, bf16, q8_0, q4_0,
// q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K).
bool is_synth_type(DType type);

// Writes the family's keys and exactly the tensors it needs (model/synth_layout.h). Weights and
// biases are N(0, 0.02²) per element, norms 1.0, rope_freqs Llama 3's factors; the same seed
// gives byte-identical files whatever the thread count. Matrices whose rows do not fit the type's
// block size fall back to f16.
Status synthesize_model(const SynthOptions& options);

// llama.cpp's general.file_type code for a file whose matrices are mostly `type`.
uint32_t file_type_code(DType type);

// The tokenizer.ggml.* keys of `vocab`.
void set_vocab_metadata(GgufWriter& writer, const Vocab& vocab);

// Where and how write_synth_tensors writes.
struct SynthOutput {
  uint64_t seed = 0;
  std::string path;
  int n_threads = 0;  // 0: all cores
  bool show_progress = true;
};

// Adds `tensors` to `writer` (its metadata set) and writes the file, each tensor filled as its
// SynthTensor says; the same seed gives the same bytes whatever the thread count.
Status write_synth_tensors(GgufWriter& writer, const std::vector<SynthTensor>& tensors,
                           const SynthOutput& output);

}  // namespace trellis
