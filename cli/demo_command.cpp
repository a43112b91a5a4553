// `trellis demo`: the README's first command. Creates the built-in default model when it is
// missing, then shows what the engine can do with it so far.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "commands.h"
#include "gguf/gguf_file.h"
#include "load_tokenizer.h"
#include "model/model_presets.h"
#include "model/synth_model.h"
#include "model_summary.h"

namespace trellis::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kDefaultPreset = "tinyllama-1.1b";
constexpr const char* kSamplePrompt =
    "Once upon a time, a little cache shared its prefix with everyone.";

// $TRELLIS_CACHE_DIR, else $XDG_CACHE_HOME/trellis, else ~/.cache/trellis.
fs::path cache_dir() {
  if (const char* dir = std::getenv("TRELLIS_CACHE_DIR")) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME")) return fs::path(xdg) / "trellis";
  if (const char* home = std::getenv("HOME")) return fs::path(home) / ".cache" / "trellis";
  return fs::temp_directory_path() / "trellis-cache";
}

Result<std::string> ensure_default_model() {
  fs::path dir = cache_dir();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Error{dir.string() + ": cannot create cache directory: " + ec.message()};
  fs::path path = dir / (std::string(kDefaultPreset) + "-q4_0.gguf");
  if (fs::exists(path)) return path.string();
  std::fprintf(stderr, "creating the default model %s (once)\n", path.c_str());
  fs::path partial = path;
  partial += ".partial";
  SynthOptions options{
      *find_model_preset(kDefaultPreset), DType::Q4_0, 0, "", partial.string(), 0, true};
  TRELLIS_TRY(synthesize_model(options));
  fs::rename(partial, path, ec);  // appears only when complete
  if (ec) return Error{path.string() + ": cannot move the new model in place: " + ec.message()};
  return path.string();
}

int run_demo() {
  Result<std::string> path = ensure_default_model();
  if (!path.ok()) {
    std::fprintf(stderr, "error: %s\n", path.error().message.c_str());
    return 1;
  }
  Result<GgufFile> file = GgufFile::open(*path);
  if (!file.ok()) {
    std::fprintf(stderr, "error: %s\n", file.error().message.c_str());
    return 1;
  }
  std::printf("== default model\n%s\n", model_summary_text(*file).c_str());
  Result<std::unique_ptr<Tokenizer>> tokenizer = load_tokenizer(*path);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "error: %s\n", tokenizer.error().message.c_str());
    return 1;
  }
  const Tokenizer& tok = **tokenizer;
  std::vector<TokenId> ids =
      tok.encode(kSamplePrompt, /*add_special=*/true, /*parse_special=*/false);
  std::printf("== tokenizing a sample prompt\nprompt: %s\n%zu tokens:", kSamplePrompt, ids.size());
  for (TokenId id : ids) std::printf(" %d", id);
  std::printf("\npieces:");
  for (TokenId id : ids) std::printf(" [%s]", tok.token_to_piece(id, true).c_str());
  std::printf("\ndecoded: %s\n", tok.decode(ids).c_str());
  return 0;
}

}  // namespace

void add_demo_command(CLI::App& app, int& exit_code) {
  CLI::App* demo =
      app.add_subcommand("demo", "Create the default model if needed and show it at work");
  demo->callback([&exit_code] { exit_code = run_demo(); });
}

}  // namespace trellis::cli
