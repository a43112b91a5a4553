// `trellis model imatrix`: an importance matrix of a model over a text, for `model quantize
// --imatrix` (or llama-quantize). The text is tokenized once and cut into chunks of --chunk tokens
// as llama.cpp's imatrix cuts it (so both give the same matrix of one text), each run through the
// engine alone with the prefix cache off; the squares of what meets each weight matrix are summed
// (model/imatrix_collector.h) and written in llama.cpp's imatrix GGUF form.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "commands.h"
#include "engine_options.h"
#include "model/imatrix_collector.h"

namespace trellis::cli {
namespace {

struct ImatrixArgs {
  EngineOptions engine;
  std::string text_file;
  std::string output = "imatrix.gguf";
  int32_t chunk = 512;
  int32_t max_chunks = 0;
};

Result<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{"cannot read the text file " + path};
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().empty()) return Error{path + ": the text is empty"};
  return text.str();
}

// The chunks of `tokens` (the text's, BOS first when the model adds one), as llama.cpp's imatrix
// cuts them: `chunk` consecutive tokens each, the first replaced by BOS when there is one, the
// rest of the text dropped.
std::vector<std::vector<TokenId>> chunks_of(const std::vector<TokenId>& tokens, int32_t chunk,
                                            TokenId bos, int32_t max_chunks) {
  const auto size = static_cast<size_t>(chunk);
  std::vector<std::vector<TokenId>> chunks;
  for (size_t at = 0; at + size <= tokens.size(); at += size) {
    if (max_chunks > 0 && chunks.size() == static_cast<size_t>(max_chunks)) break;
    std::vector<TokenId> c(tokens.begin() + static_cast<ptrdiff_t>(at),
                           tokens.begin() + static_cast<ptrdiff_t>(at + size));
    if (bos != kNoToken) c.front() = bos;
    chunks.push_back(std::move(c));
  }
  return chunks;
}

int run_imatrix(ImatrixArgs& args) {
  auto fail = [](const std::string& why) {
    std::fprintf(stderr, "error: %s\n", why.c_str());
    return 1;
  };
  if (args.chunk < 2) return fail("--chunk must be at least 2 tokens");
  if (args.max_chunks < 0) return fail("--chunks must not be negative");
  Result<std::string> text = read_text(args.text_file);
  if (!text.ok()) return fail(text.error().message);
  Result<GgufFile> file = GgufFile::open(args.engine.model);
  if (!file.ok()) return fail(file.error().message);
  ImatrixCollector collector(*file);
  args.engine.prefix_cache = "off";  // every chunk computed, none read from the cache
  args.engine.batch_tokens = std::max(args.engine.batch_tokens, args.chunk);
  if (args.engine.n_ctx == 0) args.engine.n_ctx = args.chunk;
  std::unique_ptr<Engine> engine = args.engine.open_engine(
      [&collector](EngineConfig& config) { config.activation_observer = &collector; });
  if (!engine) return 1;
  if (engine->n_ctx() < args.chunk)
    return fail("--chunk " + std::to_string(args.chunk) + " is longer than the context (" +
                std::to_string(engine->n_ctx()) + ")");
  const Vocab& vocab = engine->tokenizer().vocab();
  const std::vector<TokenId> tokens = engine->tokenizer().encode(*text, true, false);
  const std::vector<std::vector<TokenId>> chunks =
      chunks_of(tokens, args.chunk, vocab.add_bos ? vocab.bos_id : kNoToken, args.max_chunks);
  if (chunks.empty()) {
    return fail(args.text_file + ": " + std::to_string(tokens.size()) +
                " tokens, fewer than one chunk of " + std::to_string(args.chunk));
  }
  std::fprintf(stderr, "%zu tokens of %s: %zu chunks of %d\n", tokens.size(),
               args.text_file.c_str(), chunks.size(), args.chunk);
  for (size_t i = 0; i < chunks.size(); ++i) {
    EngineRequest request;
    request.prompt = chunks[i];
    request.max_tokens = 0;
    Result<RequestOutput> out = engine->run(std::move(request));
    if (!out.ok()) return fail(out.error().message);
    std::fprintf(stderr, "\rchunk %zu/%zu", i + 1, chunks.size());
  }
  std::fprintf(stderr, "\n");
  const Imatrix imatrix = collector.take({args.text_file}, static_cast<uint32_t>(chunks.size()),
                                         static_cast<uint32_t>(args.chunk));
  if (Status written = write_imatrix(imatrix, args.output); !written.ok())
    return fail(written.error().message);
  std::fprintf(stderr, "wrote %s: %zu matrices, %lld tokens\n", args.output.c_str(),
               imatrix.entries.size(), static_cast<long long>(collector.n_rows()));
  return 0;
}

}  // namespace

void add_imatrix_command(CLI::App& model, int& exit_code) {
  CLI::App* cmd = model.add_subcommand(
      "imatrix", "Compute an importance matrix over a text (for model quantize --imatrix)");
  auto args = std::make_shared<ImatrixArgs>();
  args->engine.add_to(*cmd, /*model_required=*/true);
  cmd->add_option("--text,-f", args->text_file, "The text to run (UTF-8)")->required();
  cmd->add_option("-o,--output", args->output, "Where to write it")->capture_default_str();
  cmd->add_option("--chunk", args->chunk, "Tokens per chunk (each a sequence of its own)")
      ->capture_default_str();
  cmd->add_option("--chunks", args->max_chunks, "At most this many chunks (0: the whole text)")
      ->capture_default_str();
  cmd->callback([&exit_code, args] { exit_code = run_imatrix(*args); });
}

}  // namespace trellis::cli
