// `trellis bench structured`: flags, the default inputs (vocabularies from ../shared, the
// JSON-Schema-Test-Suite package's folder, a synthesized qwen2.5-0.5b Q4_K_M), then
// bench/structured_bench.h's four figures, printed (bench/structured_report.h) and saved as
// results.json / results.csv.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/results.h"
#include "bench/structured_bench.h"
#include "bench/structured_report.h"
#include "bench_common.h"
#include "commands.h"
#include "engine_options.h"
#include "model/model_presets.h"
#include "model/synth_model.h"

namespace trellis::cli {
namespace bench_structured {
namespace {

namespace fs = std::filesystem;

struct StructuredArgs {
  EngineOptions engine;
  bench::StructuredOptions options;
  std::vector<std::string> vocabs;  // --vocab; empty: the defaults found in ../shared
  std::string schema_suite;         // --schema-suite; empty: the package's folder when installed
  std::string parts = "masks,compile,decode";
  int32_t layers = 0;  // the default model's layers (0: the preset's 24)
  bool quick = false;
  bool json = false;
  std::string out;
  CLI::App* cmd = nullptr;  // to tell given flags from defaults (--quick changes only the latter)
};

// The ../shared folder beside the checkout: $TRELLIS_SHARED_DIR, else a `shared` folder with
// tokenizer-vectors in one of the binary's ancestors (build/cli/trellis -> CHECKOUT/../shared),
// else ../shared from the working directory. Empty when none exists.
std::string find_shared_dir() {
  if (const char* env = std::getenv("TRELLIS_SHARED_DIR")) return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
      if (fs::is_directory(dir / "shared" / "tokenizer-vectors", ec))
        return (dir / "shared").string();
      if (dir == dir.parent_path()) break;
    }
  }
  if (fs::is_directory("../shared/tokenizer-vectors", ec)) return "../shared";
  return "";
}

// The default vocabularies that exist (qwen2's 152k and llama 3's 128k tokens); notes the missing.
std::vector<std::string> default_vocabs(std::vector<std::string>& notes) {
  const std::string shared = find_shared_dir();
  std::vector<std::string> found;
  for (const char* name : {"ggml-vocab-qwen2.gguf", "ggml-vocab-llama-bpe.gguf"}) {
    const std::string path =
        (fs::path(shared.empty() ? "../shared" : shared) / "tokenizer-vectors" / name).string();
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) {
      found.push_back(path);
    } else {
      notes.push_back("masks: " + path + " not found (set TRELLIS_SHARED_DIR or give --vocab)");
    }
  }
  return found;
}

// The newest draft of the Debian package json-schema-test-suite that is installed, or empty.
std::string default_schema_suite() {
  const fs::path root = "/usr/share/json-schema-test-suite/tests";
  for (const char* draft : {"draft2020-12", "draft2019-09", "draft7"}) {
    std::error_code ec;
    if (fs::is_directory(root / draft, ec)) return (root / draft).string();
  }
  return "";
}

// The default model: the qwen2.5-0.5b preset as Q4_K_M (with qwen2's own vocabulary when
// ../shared has it), `layers` of its layers (0: all), made once in the default model's folder.
Result<std::string> ensure_structured_model(int32_t layers) {
  std::optional<ModelPreset> preset = find_model_preset("qwen2.5-0.5b");
  if (!preset) return Error{"no qwen2.5-0.5b preset"};
  if (layers < 0 || layers > preset->hparams.n_layer)
    return Error{"--layers must be in [1, " + std::to_string(preset->hparams.n_layer) + "]"};
  if (layers > 0) preset->hparams.n_layer = layers;
  const std::string shared = find_shared_dir();
  const fs::path qwen_vocab = fs::path(shared) / "tokenizer-vectors" / "ggml-vocab-qwen2.gguf";
  std::error_code ec;
  const bool real_vocab = !shared.empty() && fs::is_regular_file(qwen_vocab, ec);
  const std::string name = "qwen2.5-0.5b-q4_k_m" +
                           (layers > 0 ? "-" + std::to_string(layers) + "layers" : std::string()) +
                           (real_vocab ? "-qwen2-vocab" : "") + ".gguf";
  const fs::path path = fs::path(default_model_path()).parent_path() / name;
  if (fs::exists(path, ec)) return path.string();
  fs::create_directories(path.parent_path(), ec);
  if (ec) return Error{path.string() + ": cannot create its directory: " + ec.message()};
  std::fprintf(stderr, "creating the model %s (once)\n", path.c_str());
  const std::string partial = path.string() + ".partial." + std::to_string(::getpid());
  const SynthOptions synth{.preset = *preset,
                           .type = quant_mix_base(QuantMix::Q4_K_M),
                           .vocab_from = real_vocab ? qwen_vocab.string() : "",
                           .output_path = partial,
                           .mix = QuantMix::Q4_K_M};
  TRELLIS_TRY(synthesize_model(synth));
  fs::rename(partial, path, ec);  // the model appears only when complete
  if (ec) return Error{path.string() + ": cannot move the new model in place: " + ec.message()};
  return path.string();
}

// --quick: smaller sizes for the flags not given.
void apply_quick(StructuredArgs& args) {
  bench::StructuredOptions& o = args.options;
  auto given = [&](const char* flag) { return args.cmd->count(flag) > 0; };
  if (!given("--mask-requests")) o.masks.n_requests = 3;
  if (!given("--mask-tokens")) o.masks.max_tokens = 150;
  if (!given("--compile-reps")) o.compile.reps = 1;
  if (!given("--repeats")) o.decode.repeats = 1;
  if (!given("--max-tokens")) o.decode.max_tokens = 32;
}

Status parse_parts(const std::string& parts, bench::StructuredOptions& options) {
  options.run_masks = options.run_compile = options.run_decode = false;
  std::string item;
  for (size_t begin = 0; begin <= parts.size();) {
    const size_t comma = std::min(parts.find(',', begin), parts.size());
    item = parts.substr(begin, comma - begin);
    if (item == "masks") {
      options.run_masks = true;
    } else if (item == "compile") {
      options.run_compile = true;
    } else if (item == "decode") {
      options.run_decode = true;
    } else {
      return Error{"--parts: '" + item + "' is not masks, compile or decode"};
    }
    begin = comma + 1;
  }
  return {};
}

// Fills the options' inputs from the flags and the defaults (the model: only its path); notes what
// is missing.
Status resolve_inputs(StructuredArgs& args, std::vector<std::string>& notes) {
  bench::StructuredOptions& o = args.options;
  TRELLIS_TRY(parse_parts(args.parts, o));
  if (args.quick) apply_quick(args);
  if (o.run_masks) o.masks.vocab_paths = args.vocabs.empty() ? default_vocabs(notes) : args.vocabs;
  o.schema_suite_dir = args.schema_suite.empty() ? default_schema_suite() : args.schema_suite;
  if (o.run_decode && args.engine.model.empty()) {
    Result<std::string> model = ensure_structured_model(args.layers);
    if (!model.ok()) return model.error();
    args.engine.model = *model;
  }
  return {};
}

int run_structured(StructuredArgs& args) {
  std::vector<std::string> notes;
  if (Status inputs = resolve_inputs(args, notes); !inputs.ok()) {
    return print_error(inputs.error().message);
  }
  bench::DecodeBenchOptions& decode = args.options.decode;
  if (args.options.run_decode && !resolve_engine(args.engine, decode.model_path, decode.engine))
    return 1;
  ProgressPrinter progress;
  Result<bench::StructuredResult> result =
      bench::run_structured_bench(args.options, progress.observer());
  if (!result.ok()) return print_error(result.error().message);
  nlohmann::json record = bench::run_facts(args.options.decode.model_path);
  record["bench"] = "structured";
  record["config"] = bench::structured_config_json(args.options);
  record["results"] = bench::structured_result_json(*result);
  for (const std::string& note : notes) record["results"]["notes"].push_back(note);
  if (args.json) {
    std::printf("%s\n", record.dump().c_str());
  } else {
    std::fputs(bench::structured_report(record).c_str(), stdout);
  }
  std::fflush(stdout);
  if (!save_results(args.out, "structured", record, bench::structured_csv(record["results"])).ok())
    return 1;
  return 0;
}

}  // namespace
}  // namespace bench_structured

void add_bench_structured_command(CLI::App& bench, int& exit_code) {
  using bench_structured::StructuredArgs;
  CLI::App* cmd = bench.add_subcommand(
      "structured",
      "Structured outputs: token mask time per step on real vocabularies, schema compile time, "
      "constrained vs free decode tokens/s, and jump-forward on vs off");
  auto args = std::make_shared<StructuredArgs>();
  args->cmd = cmd;
  bench::StructuredOptions& o = args->options;
  args->engine.add_to(*cmd, /*model_required=*/false);
  cmd->add_option("--parts", args->parts, "The figures to measure: masks, compile, decode")
      ->capture_default_str();
  cmd->add_option("--vocab", args->vocabs,
                  "GGUF vocabulary for the mask figures (repeatable; default: ../shared's "
                  "ggml-vocab-qwen2.gguf and ggml-vocab-llama-bpe.gguf)");
  cmd->add_option("--mask-requests", o.masks.n_requests,
                  "Simulated requests per (vocab, schema): the first cold, the others warm")
      ->capture_default_str();
  cmd->add_option("--mask-tokens", o.masks.max_tokens, "Tokens per simulated request at most")
      ->capture_default_str();
  cmd->add_option("--seed", o.masks.seed, "Seed of the simulated requests' token choices")
      ->capture_default_str();
  cmd->add_option("--schema-suite", args->schema_suite,
                  "JSON-Schema-Test-Suite folder whose schemas are compiled (default: the newest "
                  "draft under /usr/share/json-schema-test-suite/tests)");
  cmd->add_option("--compile-reps", o.compile.reps, "Compiles per schema (the median is taken)")
      ->capture_default_str();
  cmd->add_option("--layers", args->layers,
                  "Layers of the default model (qwen2.5-0.5b Q4_K_M; default all 24)");
  cmd->add_option("--batch", o.decode.batch_sizes, "Batch sizes of the decode figures")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("-n,--max-tokens", o.decode.max_tokens, "The constrained requests' max_tokens")
      ->capture_default_str();
  cmd->add_option("--repeats", o.decode.repeats,
                  "Cycles per batch size of the four decode runs (free text, constrained, "
                  "jump-forward, free text as long as jump-forward's)")
      ->capture_default_str();
  cmd->add_flag("--quick", args->quick,
                "Smaller sizes (3 mask requests of 150 tokens, 1 compile and 1 cycle, -n 32)");
  cmd->add_option("--out", args->out, "Results folder (default: bench-results/structured-<time>)");
  cmd->add_flag("--json", args->json, "Print the record as one JSON object");
  cmd->callback([&exit_code, args] { exit_code = bench_structured::run_structured(*args); });
}

}  // namespace trellis::cli
