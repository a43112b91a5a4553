#include "model/synth_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numbers>
#include <thread>
#include <vector>

#include "base/progress_bar.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/architecture.h"
#include "model/preset_chat_templates.h"
#include "model/synth_layout.h"
#include "model/synth_vocab.h"
#include "quant/quant.h"

namespace trellis {
namespace {

// splitmix64: a tiny, well-mixed generator; one independent stream per (tensor, row).
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1]: never 0, so log() below is finite.
  float uniform() { return static_cast<float>((next() >> 40) + 1) * 0x1.0p-24f; }
};

// Box-Muller: two normals per pair of uniforms.
void fill_normal(float* out, int64_t n, float stddev, uint64_t stream_seed) {
  SplitMix64 rng{stream_seed};
  for (int64_t i = 0; i < n; i += 2) {
    float radius = stddev * std::sqrt(-2.0f * std::log(rng.uniform()));
    float angle = 2.0f * std::numbers::pi_v<float> * rng.uniform();
    out[i] = radius * std::cos(angle);
    if (i + 1 < n) out[i + 1] = radius * std::sin(angle);
  }
}

uint64_t row_seed(uint64_t seed, size_t tensor_index, int64_t row) {
  SplitMix64 mix{seed ^ (static_cast<uint64_t>(tensor_index) << 40) ^ static_cast<uint64_t>(row)};
  mix.next();
  return mix.next();
}

// general.name: "trellis-synth-PRESET", except that a name containing "phi3" or "phi-3" becomes
// "trellis-synth-random": llama.cpp applies a Phi-3 vocab fix-up to such names, which needs an
// <|endoftext|> token that the synthetic vocab lacks, and would then refuse the file.
std::string general_name(const std::string& preset_name) {
  std::string lower = preset_name;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const bool phi3 =
      lower.find("phi3") != std::string::npos || lower.find("phi-3") != std::string::npos;
  return "trellis-synth-" + (phi3 ? std::string("random") : preset_name);
}

// Writes the general.*, tokenizer.* and ARCH.* keys. The vocab size becomes that of the copied
// tokenizer when options.vocab_from is set.
Status set_metadata(GgufWriter& writer, const SynthOptions& options, ModelPreset& preset) {
  writer.set("general.name", GgufValue{general_name(preset.name)});
  writer.set("general.file_type", GgufValue{options.mix ? quant_mix_file_type(*options.mix)
                                                        : file_type_code(options.type)});
  writer.set("general.quantization_version", GgufValue{uint32_t{2}});
  if (options.vocab_from.empty()) {
    set_vocab_metadata(writer, make_synth_vocab(static_cast<int32_t>(preset.hparams.n_vocab)));
    if (options.chat_template) {
      writer.set(std::string(kChatTemplateKey),
                 GgufValue{std::string(preset_chat_template(preset))});
    }
  } else {
    Result<GgufFile> source = GgufFile::open(options.vocab_from);
    if (!source.ok()) return source.error();
    Result<const GgufArray*> tokens = source->get_array("tokenizer.ggml.tokens");
    if (!tokens.ok()) return tokens.error();
    preset.hparams.n_vocab = static_cast<int64_t>((*tokens)->items.size());
    writer.copy_metadata(*source, "tokenizer.");
  }
  set_arch_metadata(writer, preset);
  return {};
}

// Produces rows [row_begin, row_end) of tensor `t` into `out`, encoded as t.type.
void encode_rows(const SynthTensor& t, size_t tensor_index, uint64_t seed, int64_t row_begin,
                 int64_t row_end, uint8_t* out, std::vector<float>& scratch) {
  const int64_t cols = t.shape[0];
  const uint64_t stride = *row_bytes(t.type, cols);
  scratch.resize(static_cast<size_t>(cols));
  for (int64_t row = row_begin; row < row_end; ++row) {
    if (t.fill == SynthFill::ONES) {
      std::fill(scratch.begin(), scratch.end(), 1.0f);
    } else if (t.fill == SynthFill::VALUES) {
      std::copy(t.values.begin(), t.values.end(), scratch.begin());
    } else {
      fill_normal(scratch.data(), cols, t.stddev, row_seed(seed, tensor_index, row));
    }
    uint8_t* dst = out + static_cast<uint64_t>(row - row_begin) * stride;
    quantize_row(t.type, scratch.data(), dst, cols);
  }
}

}  // namespace

void set_vocab_metadata(GgufWriter& writer, const Vocab& vocab) {
  std::vector<int32_t> types;
  types.reserve(vocab.types.size());
  for (TokenType t : vocab.types) types.push_back(static_cast<int32_t>(t));
  writer.set("tokenizer.ggml.model", GgufValue{vocab.model});
  writer.set("tokenizer.ggml.tokens", gguf_string_array(vocab.tokens));
  writer.set("tokenizer.ggml.scores", gguf_f32_array(vocab.scores));
  writer.set("tokenizer.ggml.token_type", gguf_i32_array(types));
  writer.set("tokenizer.ggml.bos_token_id", GgufValue{static_cast<uint32_t>(vocab.bos_id)});
  writer.set("tokenizer.ggml.eos_token_id", GgufValue{static_cast<uint32_t>(vocab.eos_id)});
  writer.set("tokenizer.ggml.unknown_token_id", GgufValue{static_cast<uint32_t>(vocab.unk_id)});
  writer.set("tokenizer.ggml.add_bos_token", GgufValue{vocab.add_bos});
  writer.set("tokenizer.ggml.add_eos_token", GgufValue{vocab.add_eos});
}

uint32_t file_type_code(DType type) {
  switch (type) {
    case DType::F32:
      return 0;
    case DType::F16:
      return 1;
    case DType::Q4_0:
      return 2;
    case DType::Q4_1:
      return 3;
    case DType::Q8_0:
      return 7;
    case DType::Q5_0:
      return 8;
    case DType::Q5_1:
      return 9;
    case DType::Q2_K:
      return 10;
    case DType::Q3_K:
      return 11;  // MOSTLY_Q3_K_S: every matrix Q3_K
    case DType::Q4_K:
      return 14;  // MOSTLY_Q4_K_S
    case DType::Q5_K:
      return 16;  // MOSTLY_Q5_K_S
    case DType::Q6_K:
      return 18;
    case DType::BF16:
      return 32;
    case DType::MXFP4:
      return 38;  // MOSTLY_MXFP4_MOE
    default:
      return 0;
  }
}

Status write_synth_tensors(GgufWriter& writer, const std::vector<SynthTensor>& tensors,
                           const SynthOutput& output) {
  uint64_t total_bytes = 0;
  for (const SynthTensor& t : tensors) {
    Result<uint64_t> size = writer.add_tensor(t.name, t.type, t.shape);
    if (!size.ok()) return size.error();
    total_bytes += *size;
  }
  TRELLIS_TRY(writer.begin(output.path));

  const int n_threads = output.n_threads > 0
                            ? output.n_threads
                            : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  constexpr uint64_t kChunkBytes = 8ull << 20;  // bytes encoded between writes
  std::vector<uint8_t> chunk;
  std::vector<std::vector<float>> scratch(static_cast<size_t>(n_threads));
  std::optional<ProgressBar> progress;
  if (output.show_progress) progress.emplace("synthesizing " + output.path, total_bytes);
  uint64_t done_bytes = 0;

  for (size_t ti = 0; ti < tensors.size(); ++ti) {
    const SynthTensor& t = tensors[ti];
    int64_t n_rows = 1;
    for (size_t d = 1; d < t.shape.size(); ++d) n_rows *= t.shape[d];
    const uint64_t stride = *row_bytes(t.type, t.shape[0]);
    const int64_t rows_per_chunk = std::max<int64_t>(1, static_cast<int64_t>(kChunkBytes / stride));
    for (int64_t begin = 0; begin < n_rows; begin += rows_per_chunk) {
      const int64_t end = std::min(n_rows, begin + rows_per_chunk);
      chunk.resize(static_cast<size_t>(end - begin) * stride);
      // Rows are split evenly over the threads; each row's content depends only on its seed.
      std::vector<std::thread> workers;
      const int64_t per_thread = (end - begin + n_threads - 1) / n_threads;
      for (int w = 0; w < n_threads; ++w) {
        int64_t wb = begin + w * per_thread;
        int64_t we = std::min(end, wb + per_thread);
        if (wb >= we) break;
        workers.emplace_back([&, w, wb, we] {
          encode_rows(t, ti, output.seed, wb, we,
                      chunk.data() + static_cast<uint64_t>(wb - begin) * stride, scratch[w]);
        });
      }
      for (std::thread& worker : workers) worker.join();
      TRELLIS_TRY(writer.write_tensor_data(chunk));
      done_bytes += chunk.size();
      if (progress) progress->update(done_bytes);
    }
  }
  return writer.finish();
}

namespace {

// The keys and tensors of an embedding model or reranker (SynthOptions::pooling).
void add_pooling(GgufWriter& writer, const ModelPreset& preset, Pooling pooling,
                 std::vector<SynthTensor>& tensors) {
  const std::string arch(file_architecture(*find_architecture(preset.hparams.arch)));
  writer.set(arch + ".pooling_type", GgufValue{static_cast<uint32_t>(pooling)});
  if (pooling != Pooling::RANK) return;
  writer.set(arch + ".classifier.output_labels", gguf_string_array({"yes", "no"}));
  writer.set("tokenizer.chat_template.rerank", GgufValue{std::string(kSynthRerankTemplate)});
  const int64_t n_embd = preset.hparams.n_embd;
  tensors.push_back({"cls.output.weight",
                     DType::F32,
                     {n_embd, 2},
                     SynthFill::NORMAL,
                     {},
                     1.0f / std::sqrt(static_cast<float>(n_embd))});
}

}  // namespace

bool is_synth_type(DType type) {
  return can_quantize(type);
}

Status synthesize_model(const SynthOptions& options) {
  if (!is_synth_type(options.type)) {
    return Error{"model synth: type " + std::string(dtype_name(options.type)) +
                 " is not supported (" + quant_type_names() + ", " + std::string(kQuantMixNames) +
                 ")"};
  }
  if (find_architecture(options.preset.hparams.arch) == nullptr) {
    return Error{"model synth: unsupported architecture '" + options.preset.hparams.arch + "'"};
  }
  ModelPreset preset = options.preset;
  GgufWriter writer;
  TRELLIS_TRY(set_metadata(writer, options, preset));
  std::vector<SynthTensor> tensors = synth_tensor_list(preset, options.type);
  if (options.pooling) add_pooling(writer, preset, *options.pooling, tensors);
  if (options.mix) {
    for (SynthTensor& t : tensors) {
      if (t.shape.size() >= 2 && t.type != DType::F32) {  // a router stays f32
        t.type = quant_mix_type(*options.mix, t.name, t.shape[0], preset.hparams.n_layer,
                                preset.tied_output);
      }
    }
  }
  return write_synth_tensors(
      writer, tensors,
      {options.seed, options.output_path, options.n_threads, options.show_progress});
}

}  // namespace trellis
