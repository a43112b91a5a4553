// `trellis model info` and `trellis model synth`.
#include <cstdio>
#include <string>

#include "base/thread_pool.h"
#include "commands.h"
#include "gguf/gguf_file.h"
#include "model/architecture.h"
#include "model/encoder_synth.h"
#include "model/model_presets.h"
#include "model/quant_mix.h"
#include "model/quantize_model.h"
#include "model/synth_family.h"
#include "model/synth_model.h"
#include "model_summary.h"
#include "quant/quant.h"

namespace trellis::cli {
namespace {

int run_info(const std::string& path, bool json) {
  Result<GgufFile> file = GgufFile::open(path);
  if (!file.ok()) {
    std::fprintf(stderr, "error: %s\n", file.error().message.c_str());
    return 1;
  }
  if (json) {
    std::printf("%s\n", model_summary_json(*file).dump(2).c_str());
  } else {
    std::printf("%s", model_summary_text(*file).c_str());
  }
  return 0;
}

std::string preset_names() {
  std::string names;
  for (const ModelPreset& p : model_presets()) names += (names.empty() ? "" : ", ") + p.name;
  return names;
}

struct SynthArgs {
  std::string preset = "tiny";
  std::string arch;      // empty: the preset's own family
  int64_t longrope = 0;  // 0: the preset's rope; else LongRoPE from this original context
  int64_t layers = 0;    // 0: the preset's; else only the first N layers
  double yarn = 0;       // 0: the preset's rope; else YaRN scaling by this factor
  std::string type = "q4_0";
  uint64_t seed = 0;
  std::string vocab_from;
  bool no_chat_template = false;
  std::string output;
  int threads = 0;
  std::string pooling;  // encoders: mean, cls, last or rank (default mean)
};

// `model synth --arch bert|nomic-bert`: an embedding model or reranker.
int run_encoder_synth(const SynthArgs& args, const EncoderFamily& family) {
  EncoderSynthOptions options;
  options.family = &family;
  options.preset = find_encoder_preset(args.preset);
  if (options.preset == nullptr) {
    std::fprintf(stderr, "error: unknown encoder preset '%s' (known: %s)\n", args.preset.c_str(),
                 encoder_preset_names().c_str());
    return 1;
  }
  const std::optional<Pooling> pooling =
      pooling_from_name(args.pooling.empty() ? "mean" : args.pooling);
  if (!pooling || *pooling == Pooling::NONE) {
    std::fprintf(stderr, "error: unknown pooling '%s' (mean, cls, last, rank)\n",
                 args.pooling.c_str());
    return 1;
  }
  options.pooling = *pooling;
  const std::optional<DType> type = dtype_from_name(args.type);
  if (!type || !is_synth_type(*type)) {
    std::fprintf(stderr, "error: unsupported type '%s' (%s)\n", args.type.c_str(),
                 quant_type_names().c_str());
    return 1;
  }
  options.type = *type;
  options.seed = args.seed;
  options.output_path = args.output;
  options.n_threads = args.threads;
  Status status = synthesize_encoder(options);
  if (!status.ok()) {
    std::fprintf(stderr, "error: %s\n", status.error().message.c_str());
    return 1;
  }
  std::fprintf(stderr, "wrote %s\n", args.output.c_str());
  return 0;
}

int run_synth(const SynthArgs& args) {
  if (const EncoderFamily* encoder = find_encoder_family(args.arch)) {
    return run_encoder_synth(args, *encoder);
  }
  std::optional<Pooling> pooling;
  if (!args.pooling.empty()) {
    pooling = pooling_from_name(args.pooling);
    if (!pooling || (*pooling != Pooling::LAST && *pooling != Pooling::RANK)) {
      std::fprintf(stderr,
                   "error: a decoder's --pooling is last (an embedding model) or rank (a yes/no "
                   "reranker), not '%s'\n",
                   args.pooling.c_str());
      return 1;
    }
  }
  std::optional<ModelPreset> preset = find_model_preset(args.preset);
  if (!preset) {
    std::fprintf(stderr, "error: unknown preset '%s' (known: %s)\n", args.preset.c_str(),
                 preset_names().c_str());
    return 1;
  }
  if (!args.arch.empty()) {
    Result<ModelPreset> recast = preset_for_arch(*preset, args.arch);
    if (!recast.ok()) {
      std::fprintf(stderr, "error: %s\n", recast.error().message.c_str());
      return 1;
    }
    *preset = std::move(recast).value();
  }
  if (args.longrope > 0) {
    Result<ModelPreset> scaled = with_longrope(*preset, args.longrope);
    if (!scaled.ok()) {
      std::fprintf(stderr, "error: %s\n", scaled.error().message.c_str());
      return 1;
    }
    *preset = std::move(scaled).value();
  }
  if (args.yarn > 0) {
    Result<ModelPreset> scaled = with_yarn(*preset, args.yarn);
    if (!scaled.ok()) {
      std::fprintf(stderr, "error: %s\n", scaled.error().message.c_str());
      return 1;
    }
    *preset = std::move(scaled).value();
  }
  if (args.layers > 0) {
    if (args.layers > preset->hparams.n_layer) {
      std::fprintf(stderr, "error: --layers %lld exceeds the preset's %lld layers\n",
                   static_cast<long long>(args.layers),
                   static_cast<long long>(preset->hparams.n_layer));
      return 1;
    }
    preset->hparams.n_layer = args.layers;
  }
  // A single type's name means that type for every matrix (q4_0, q6_K, ...); the mixes are the
  // names of none (q4_k_m, ...).
  std::optional<DType> type = dtype_from_name(args.type);
  const std::optional<QuantMix> mix = type ? std::nullopt : parse_quant_mix(args.type);
  if (mix) type = quant_mix_base(*mix);
  if (!type || !is_synth_type(*type)) {
    std::fprintf(stderr, "error: unsupported type '%s' (%s, %s)\n", args.type.c_str(),
                 quant_type_names().c_str(), std::string(kQuantMixNames).c_str());
    return 1;
  }
  SynthOptions options{*preset,     *type,        args.seed, args.vocab_from,
                       args.output, args.threads, true,      mix};
  options.chat_template = !args.no_chat_template;
  options.pooling = pooling;
  Status status = synthesize_model(options);
  if (!status.ok()) {
    std::fprintf(stderr, "error: %s\n", status.error().message.c_str());
    return 1;
  }
  std::fprintf(stderr, "wrote %s\n", args.output.c_str());
  return 0;
}

struct QuantizeArgs {
  std::string input;
  std::string output;
  std::string type;
  std::string imatrix;
  int threads = 0;
};

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

int run_quantize(const QuantizeArgs& args) {
  const std::optional<QuantMix> mix = parse_quant_mix(args.type);
  if (!mix || *mix == QuantMix::MXFP4_MOE) {
    std::fprintf(stderr, "error: unsupported file type '%s' (%s)\n", args.type.c_str(),
                 std::string(kQuantizeTypeNames).c_str());
    return 1;
  }
  std::optional<Imatrix> imatrix;
  if (!args.imatrix.empty()) {
    Result<Imatrix> read = read_imatrix(args.imatrix);
    if (!read.ok()) {
      std::fprintf(stderr, "error: %s\n", read.error().message.c_str());
      return 1;
    }
    imatrix = std::move(read).value();
    std::fprintf(stderr, "importance matrix %s: %zu matrices, %u chunks\n", args.imatrix.c_str(),
                 imatrix->entries.size(), imatrix->chunk_count);
  }
  ThreadPool pool(args.threads > 0 ? args.threads : ThreadPool::default_thread_count());
  int64_t index = 0;
  int64_t n_weighted = 0;
  auto report = [&index, &n_weighted](const QuantizedTensor& t) {
    n_weighted += t.weighted ? 1 : 0;
    std::fprintf(stderr, "[%4lld] %-40s %6s -> %-6s %10.2f MiB -> %10.2f MiB%s\n",
                 static_cast<long long>(++index), t.name.c_str(), dtype_name(t.from).data(),
                 dtype_name(t.to).data(), mib(t.bytes_in), mib(t.bytes_out),
                 t.weighted ? " (imatrix)" : "");
  };
  Result<QuantizeTotals> totals = quantize_model(args.input, args.output, *mix, pool, report,
                                                 imatrix ? &*imatrix : nullptr, args.imatrix);
  if (!totals.ok()) {
    std::fprintf(stderr, "error: %s\n", totals.error().message.c_str());
    return 1;
  }
  std::fprintf(stderr, "wrote %s: %lld of %lld tensors quantized, %.2f MiB -> %.2f MiB\n",
               args.output.c_str(), static_cast<long long>(totals->n_quantized),
               static_cast<long long>(totals->n_tensors), mib(totals->bytes_in),
               mib(totals->bytes_out));
  if (imatrix) {
    std::fprintf(stderr, "the importance matrix weighed %lld of them\n",
                 static_cast<long long>(n_weighted));
  }
  return 0;
}

}  // namespace

void add_model_commands(CLI::App& app, int& exit_code) {
  CLI::App* model = app.add_subcommand("model", "Inspect and create GGUF models");
  model->require_subcommand(1);

  CLI::App* info =
      model->add_subcommand("info", "Print a GGUF file's architecture, tokenizer and tensors");
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  info->add_option("file", *path, "GGUF file")->required();
  info->add_flag("--json", *json, "Print JSON");
  info->callback([&exit_code, path, json] { exit_code = run_info(*path, *json); });

  CLI::App* synth = model->add_subcommand("synth", "Write a GGUF (" + supported_architectures() +
                                                       ") with deterministic random weights");
  auto args = std::make_shared<SynthArgs>();
  synth
      ->add_option("--preset", args->preset,
                   "Shape preset: " + preset_names() + "; encoders: " + encoder_preset_names())
      ->capture_default_str();
  synth->add_option("--arch", args->arch,
                    "Family: " + synth_family_names() +
                        ", or an encoder: " + encoder_family_names() + " (default: the preset's)");
  synth->add_option("--pooling", args->pooling,
                    "Encoders: mean, cls, last, or rank (a cross-encoder reranker); decoders: last "
                    "(an embedding model, as Qwen3-Embedding) or rank (a yes/no reranker, as "
                    "Qwen3-Reranker)");
  synth
      ->add_option("--type", args->type,
                   "Weight type: " + quant_type_names() + ", " + std::string(kQuantMixNames))
      ->capture_default_str();
  synth->add_option("--longrope", args->longrope,
                    "phi3: LongRoPE factors (as Phi-3.5) from this original context to the "
                    "preset's");
  synth->add_option("--yarn", args->yarn,
                    "YaRN rope scaling by this factor, from an original context of the preset's "
                    "divided by it");
  synth->add_option(
      "--layers", args->layers,
      "Write only the first N layers (a real shape's per-layer cost in a small file)");
  synth->add_option("--seed", args->seed, "Random seed")->capture_default_str();
  synth->add_option("--vocab-from", args->vocab_from, "Copy the tokenizer of this GGUF");
  synth->add_flag("--no-chat-template", args->no_chat_template,
                  "Write no tokenizer.chat_template (default: the format of the preset's real "
                  "chat models, with the built-in vocab)");
  synth->add_option("-o,--output", args->output, "Output GGUF path")->required();
  synth->add_option("-t,--threads", args->threads, "Threads (default: all cores)");
  synth->callback([&exit_code, args] { exit_code = run_synth(*args); });

  add_imatrix_command(*model, exit_code);

  CLI::App* quantize = model->add_subcommand(
      "quantize",
      "Rewrite a GGUF of F32, F16 or BF16 weights as one of llama.cpp's file types (the same "
      "types per matrix and the same bytes as llama-quantize without an importance matrix)");
  auto qargs = std::make_shared<QuantizeArgs>();
  quantize->add_option("input", qargs->input, "Input GGUF (F32, F16 or BF16 weights)")
      ->required();
  quantize->add_option("output", qargs->output, "Output GGUF path")->required();
  quantize->add_option("type", qargs->type, "File type: " + std::string(kQuantizeTypeNames))
      ->required();
  quantize->add_option("--imatrix", qargs->imatrix,
                       "Importance matrix (GGUF, from `trellis model imatrix` or llama-imatrix): "
                       "weighs each column's error by the activations it meets");
  quantize->add_option("-t,--threads", qargs->threads, "Threads (default: all cores)");
  quantize->callback([&exit_code, qargs] { exit_code = run_quantize(*qargs); });
}

}  // namespace trellis::cli
