// `trellis bench embed`: embedding or rerank throughput of servers side by side (see
// bench/embedding_bench.h). With -m FILE it starts `trellis serve` on the file itself, in this
// process, as the first server; --url adds running servers (a llama.cpp server, say).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "bench/embedding_bench.h"
#include "bench/results.h"
#include "bench_common.h"
#include "commands.h"
#include "embed/embedder.h"
#include "server/embedding_service.h"
#include "server/http_server.h"

namespace trellis::cli {
namespace {

using nlohmann::json;

struct EmbedBenchArgs {
  bench::EmbeddingBenchOptions options;
  std::string model;  // served in-process as "trellis"
  std::vector<std::string> urls;
  int threads = 0;
  int32_t batch_tokens = 4096;
  bool json_output = false;
};

int run_bench_embed(EmbedBenchArgs& args) {
  bench::EmbeddingBenchOptions& o = args.options;
  std::unique_ptr<Embedder> embedder;
  std::unique_ptr<EmbeddingService> service;
  std::unique_ptr<HttpServer> server;
  std::thread serving;
  if (!args.model.empty()) {
    Result<std::unique_ptr<Embedder>> opened = Embedder::open(
        args.model, {.n_threads = args.threads, .max_batch_tokens = args.batch_tokens});
    if (!opened.ok()) return print_error(opened.error().message);
    embedder = std::move(opened).value();
    ServerConfig config;
    config.port = 0;
    config.log_requests = false;
    config.model_id = "trellis";
    service = std::make_unique<EmbeddingService>(*embedder, config, args.batch_tokens);
    server = std::make_unique<HttpServer>(config, EmbeddingService::endpoints());
    if (Status bound = server->bind(); !bound.ok()) return print_error(bound.error().message);
    serving = std::thread([&] { server->serve(); });
    server->set_api(*service);
    o.urls.push_back("http://127.0.0.1:" + std::to_string(server->port()));
    o.names.push_back("trellis");
  }
  for (const std::string& url : args.urls) {
    o.urls.push_back(url);
    o.names.push_back(url);
  }
  Result<json> record = bench::run_embedding_bench(
      o, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
  if (server) {
    server->shutdown();
    serving.join();
  }
  if (!record.ok()) return print_error(record.error().message);
  (*record)["machine"] = bench::machine_json();
  if (args.json_output) {
    std::printf("%s\n", record->dump(2).c_str());
    return 0;
  }
  std::printf("bench embed (%s): %lld inputs of ~%d words per round, %d clients, CPU %s\n",
              (*record)["mode"].get<std::string>().c_str(),
              static_cast<long long>((*record)["inputs_per_round"].get<int64_t>()), o.words,
              o.clients, (*record)["machine"]["cpu"].get<std::string>().c_str());
  std::printf("| server | inputs/s (median) | tokens/s | tokens per round | vs first |\n");
  std::printf("|---|---|---|---|---|\n");
  const json& servers = (*record)["servers"];
  for (size_t s = 0; s < servers.size(); ++s) {
    const double ratio = s == 0 ? 1.0 : (*record)["ratios_over_first"][s - 1].get<double>();
    std::printf(
        "| %s | %.1f | %.0f | %lld | %.2fx |\n", servers[s]["name"].get<std::string>().c_str(),
        servers[s]["median_inputs_per_s"].get<double>(),
        servers[s]["median_tokens_per_s"].get<double>(),
        static_cast<long long>(servers[s]["prompt_tokens_per_round"].get<int64_t>()), ratio);
  }
  return 0;
}

}  // namespace

void add_bench_embed_command(CLI::App& bench, int& exit_code) {
  CLI::App* cmd = bench.add_subcommand(
      "embed", "Embedding (or --rerank) throughput of servers side by side over HTTP");
  auto args = std::make_shared<EmbedBenchArgs>();
  bench::EmbeddingBenchOptions& o = args->options;
  cmd->add_option("-m,--model", args->model, "Serve this encoder file in-process as 'trellis'");
  cmd->add_option("--url", args->urls, "A running server's root (http://127.0.0.1:8080)");
  cmd->add_flag("--rerank", o.rerank, "Measure /v1/rerank instead of /v1/embeddings");
  cmd->add_option("--passages", o.passages, "Embed: passages per round")->capture_default_str();
  cmd->add_option("--words", o.words, "Words per passage")->capture_default_str();
  cmd->add_option("--batch", o.batch, "Embed: inputs per request")->capture_default_str();
  cmd->add_option("--documents", o.documents, "Rerank: documents per request")
      ->capture_default_str();
  cmd->add_option("--rerank-requests", o.rerank_requests, "Rerank: requests per round")
      ->capture_default_str();
  cmd->add_option("--clients", o.clients, "Concurrent clients")->capture_default_str();
  cmd->add_option("--rounds", o.rounds, "Rounds (servers take turns)")->capture_default_str();
  cmd->add_option("-t,--threads", args->threads, "Threads of the in-process server");
  cmd->add_option("--batch-tokens", args->batch_tokens,
                  "Tokens one forward pass of the in-process server gathers")
      ->capture_default_str();
  cmd->add_flag("--json", args->json_output, "Print the record as JSON");
  cmd->callback([&exit_code, args] { exit_code = run_bench_embed(*args); });
}

}  // namespace trellis::cli
