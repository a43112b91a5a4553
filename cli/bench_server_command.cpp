// `trellis bench server`: the HTTP server under concurrent chat clients that share a system
// prompt, with the prefix cache off and on (a fresh engine and server each, one run).
//
// Each of --clients threads sends --requests streaming chat requests one after another over
// loopback: the same system message (--system-len tokens of text), a user message of its own,
// greedy, D tokens. TTFT is the time from sending a request to its first content chunk; latency
// is until [DONE]. One untimed request first pages the weights in. Reported per run: requests/s,
// TTFT and latency p50/p99, cached / prompt tokens (from each response's usage), and whether both
// runs produced the same texts.
#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "base/progress_bar.h"
#include "bench_report.h"
#include "bench_support.h"
#include "commands.h"
#include "generator_options.h"
#include "server/http_server.h"

namespace trellis::cli {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct ServerBenchArgs {
  GeneratorOptions generator;
  int32_t clients = 16;
  int32_t requests = 2;  // per client
  int32_t system_len = 256;
  int32_t user_len = 24;
  int32_t decode_len = 16;
  std::string chat_template = "chatml";  // used when the model has none
  bool json_output = false;
  std::string out;
};

struct RequestFigures {
  double ttft_ms = 0;
  double latency_ms = 0;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t completion_tokens = 0;
  std::string text;
};

struct RunFigures {
  std::string label;
  double wall_ms = 0;
  std::vector<RequestFigures> requests;  // client-major order
};

// The text of n pseudo-random tokens: stable across runs, tokenizes to about n tokens.
std::string bench_text(const Tokenizer& tokenizer, int32_t n, uint32_t seed) {
  return tokenizer.decode(bench_tokens(n, tokenizer.vocab().size(), seed));
}

// One streaming chat request; errors name the status or the transport failure.
Result<RequestFigures> chat_request(int port, const json& body) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(600, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.set_header("Content-Type", "application/json");
  req.body = body.dump(-1, ' ', false,
                       json::error_handler_t::replace);  // random text may be invalid UTF-8
  RequestFigures figures;
  std::string pending;
  const Clock::time_point start = Clock::now();
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    pending.append(data, size);
    size_t end;
    while ((end = pending.find("\n\n")) != std::string::npos) {
      const std::string event = pending.substr(0, end);
      pending.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0 || event == "data: [DONE]") continue;
      const json chunk = json::parse(event.substr(6), nullptr, false);
      if (chunk.is_discarded()) continue;
      if (chunk.contains("usage") && chunk["usage"].is_object()) {
        figures.prompt_tokens = chunk["usage"]["prompt_tokens"];
        figures.cached_tokens = chunk["usage"]["prompt_tokens_details"]["cached_tokens"];
        figures.completion_tokens = chunk["usage"]["completion_tokens"];
      }
      for (const json& choice : chunk.value("choices", json::array())) {
        const json& delta = choice["delta"];
        if (!delta.contains("content") || delta["content"].get<std::string>().empty()) continue;
        if (figures.text.empty())
          figures.ttft_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        figures.text += delta["content"].get<std::string>();
      }
    }
    return true;
  };
  httplib::Result r = client.send(req);
  if (!r) return Error{"request failed: " + httplib::to_string(r.error())};
  if (r->status != 200) return Error{"HTTP " + std::to_string(r->status) + ": " + r->body};
  figures.latency_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return figures;
}

json chat_body(const std::string& system, const std::string& user, int32_t max_tokens) {
  return {{"messages",
           {{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", user}}}},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"ignore_eos", true},
          {"stream", true},
          {"stream_options", {{"include_usage", true}}}};
}

Result<RunFigures> run_clients(ServerBenchArgs& args, bool cache_on) {
  std::unique_ptr<Engine> engine = args.generator.open_engine(
      [&](EngineConfig& config) { config.prefix_cache.enabled = cache_on; });
  if (!engine) return Error{"cannot start the engine"};
  ServerConfig config;
  config.port = 0;
  config.model_id = "bench";
  config.log_requests = false;
  if (Result<ChatTemplateKind> detected = detect_chat_template(engine->file()); !detected.ok()) {
    Result<ChatTemplateKind> kind = parse_chat_template_name(args.chat_template);
    if (!kind.ok()) return kind.error();
    config.chat_template = *kind;
  }
  HttpServer server(config);
  TRELLIS_TRY(server.bind());
  std::thread serving([&server] { server.serve(); });
  server.set_engine(*engine);
  const Tokenizer& tokenizer = engine->tokenizer();
  const std::string system = bench_text(tokenizer, args.system_len, 7);

  RunFigures run;
  run.label = cache_on ? "cache on" : "cache off";
  Status failed;
  // Warm-up (not counted): pages the weights in; its own system prompt shares nothing.
  Result<RequestFigures> warm =
      chat_request(server.port(), chat_body(bench_text(tokenizer, 32, 99), "warm up", 2));
  if (!warm.ok()) failed = warm.error();
  run.requests.resize(static_cast<size_t>(args.clients * args.requests));
  std::mutex mutex;
  int64_t done = 0;
  ProgressBar progress(run.label, static_cast<uint64_t>(run.requests.size()));
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> clients;
  for (int32_t c = 0; c < args.clients && failed.ok(); ++c) {
    clients.emplace_back([&, c] {
      for (int32_t i = 0; i < args.requests; ++i) {
        const auto seed = static_cast<uint32_t>(1000 + c * args.requests + i);
        Result<RequestFigures> r = chat_request(
            server.port(),
            chat_body(system, bench_text(tokenizer, args.user_len, seed), args.decode_len));
        std::lock_guard<std::mutex> lock(mutex);
        if (!r.ok()) {
          failed = r.error();
          return;
        }
        run.requests[static_cast<size_t>(c * args.requests + i)] = std::move(r).value();
        progress.update(static_cast<uint64_t>(++done));
      }
    });
  }
  for (std::thread& t : clients) t.join();
  run.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  server.shutdown();
  serving.join();
  if (!failed.ok()) return failed.error();
  return run;
}

json run_json(const RunFigures& run) {
  std::vector<double> ttft, latency;
  int64_t prompt = 0, cached = 0, generated = 0;
  for (const RequestFigures& r : run.requests) {
    ttft.push_back(r.ttft_ms);
    latency.push_back(r.latency_ms);
    prompt += r.prompt_tokens;
    cached += r.cached_tokens;
    generated += r.completion_tokens;
  }
  const double seconds = run.wall_ms / 1000.0;
  return {{"run", run.label},
          {"requests", run.requests.size()},
          {"requests_per_s", seconds > 0 ? static_cast<double>(run.requests.size()) / seconds : 0},
          {"ttft_ms_mean", stats(ttft).mean},
          {"ttft_ms_p50", percentile(ttft, 0.5)},
          {"ttft_ms_p99", percentile(ttft, 0.99)},
          {"latency_ms_p50", percentile(latency, 0.5)},
          {"latency_ms_p99", percentile(latency, 0.99)},
          {"prompt_tokens", prompt},
          {"cached_tokens", cached},
          {"hit_rate", prompt > 0 ? static_cast<double>(cached) / static_cast<double>(prompt) : 0},
          {"generation_tokens_per_s", seconds > 0 ? static_cast<double>(generated) / seconds : 0},
          {"wall_ms", run.wall_ms}};
}

// results.csv: one row per run.
CsvTable results_table(const json& record) {
  return csv_table(record["runs"],
                   {"run", "requests", "requests_per_s", "ttft_ms_mean", "ttft_ms_p50",
                    "ttft_ms_p99", "latency_ms_p50", "latency_ms_p99", "prompt_tokens",
                    "cached_tokens", "hit_rate", "generation_tokens_per_s", "wall_ms"});
}

int run_bench_server(ServerBenchArgs& args) {
  if (args.clients <= 0 || args.requests <= 0 || args.system_len <= 0 || args.user_len <= 0 ||
      args.decode_len <= 0) {
    std::fprintf(stderr,
                 "error: --clients, --requests, --system-len, --user-len and -D must be "
                 "positive\n");
    return 1;
  }
  std::vector<RunFigures> runs;
  for (bool cache_on : {false, true}) {
    Result<RunFigures> run = run_clients(args, cache_on);
    if (!run.ok()) {
      std::fprintf(stderr, "error: %s\n", run.error().message.c_str());
      return 1;
    }
    runs.push_back(std::move(run).value());
  }
  bool identical = true;
  for (size_t i = 0; i < runs[0].requests.size(); ++i)
    identical &= runs[0].requests[i].text == runs[1].requests[i].text;
  json rows = json::array();
  for (const RunFigures& run : runs) rows.push_back(run_json(run));
  json record = {{"bench", "server"},
                 {"clients", args.clients},
                 {"requests_per_client", args.requests},
                 {"system_len", args.system_len},
                 {"user_len", args.user_len},
                 {"D", args.decode_len},
                 {"machine", machine_json()},
                 {"commit", source_commit()},
                 {"runs", rows},
                 {"outputs_identical", identical}};
  Result<json> model = model_file_json(args.generator.model);
  record["model"] = model.ok() ? *model : json{{"path", args.generator.model}};
  if (Result<std::string> written =
          write_results(args.out, "server", record, results_table(record));
      !written.ok()) {
    std::fprintf(stderr, "error: %s\n", written.error().message.c_str());
    return 1;
  }
  if (args.json_output) {
    std::printf("%s\n", record.dump().c_str());
  } else {
    std::printf(
        "bench server: %d chat clients x %d streaming requests, system prompt ~%d tokens, "
        "user ~%d, D=%d, model %s\n",
        args.clients, args.requests, args.system_len, args.user_len, args.decode_len,
        args.generator.model.c_str());
    std::printf(
        "| run | requests/s | TTFT p50 | TTFT p99 | latency p50 | latency p99 | cached / "
        "prompt tokens | gen tokens/s |\n|---|---|---|---|---|---|---|---|\n");
    for (const json& r : rows) {
      std::printf("| %s | %.3f | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %lld / %lld | %.2f |\n",
                  r["run"].get<std::string>().c_str(), r["requests_per_s"].get<double>(),
                  r["ttft_ms_p50"].get<double>(), r["ttft_ms_p99"].get<double>(),
                  r["latency_ms_p50"].get<double>(), r["latency_ms_p99"].get<double>(),
                  r["cached_tokens"].get<long long>(), r["prompt_tokens"].get<long long>(),
                  r["generation_tokens_per_s"].get<double>());
    }
    std::printf("outputs: %s\n", identical ? "identical" : "DIFFERENT");
  }
  if (!identical) {
    std::fprintf(stderr, "error: the texts differ between cache off and on\n");
    return 1;
  }
  return 0;
}

}  // namespace

void add_bench_server_command(CLI::App& bench, int& exit_code) {
  CLI::App* cmd = bench.add_subcommand(
      "server", "Concurrent chat clients over HTTP sharing a system prompt: cache off vs on");
  auto args = std::make_shared<ServerBenchArgs>();
  args->generator.add_to(*cmd, /*model_required=*/false);
  args->generator.add_scheduler_options(*cmd);
  cmd->add_option("--clients", args->clients, "Concurrent clients")->capture_default_str();
  cmd->add_option("--requests", args->requests, "Requests per client, one after another")
      ->capture_default_str();
  cmd->add_option("--system-len", args->system_len, "Shared system prompt, in tokens of text")
      ->capture_default_str();
  cmd->add_option("--user-len", args->user_len, "Each user message, in tokens of text")
      ->capture_default_str();
  cmd->add_option("-D", args->decode_len, "Tokens generated per request")->capture_default_str();
  cmd->add_option("--chat-template", args->chat_template, "Chat format when the model has none")
      ->capture_default_str();
  cmd->add_flag("--json", args->json_output, "Print one JSON object");
  cmd->add_option("--out", args->out,
                  "Folder for results.json and results.csv (default bench-results/server-...)");
  cmd->callback([&exit_code, args] {
    if (args->generator.model.empty()) {
      args->generator.model = default_model_path();
      if (Status made = ensure_default_model(args->generator.model); !made.ok()) {
        std::fprintf(stderr, "error: %s\n", made.error().message.c_str());
        exit_code = 1;
        return;
      }
    }
    exit_code = run_bench_server(*args);
  });
}

}  // namespace trellis::cli
