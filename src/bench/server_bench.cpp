#include "bench/server_bench.h"

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "bench/bench_server.h"
#include "bench/bench_tokens.h"
#include "bench/http_load_client.h"
#include "bench/results.h"
#include "bench/stats.h"

namespace trellis::bench {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// The bench_tokens seeds of the texts: the shared system prompt, the warm-up's system prompt,
// and client c's request i (+ c * requests + i).
constexpr uint32_t kSystemSeed = 7;
constexpr uint32_t kWarmUpSeed = 99;
constexpr uint32_t kUserSeed = 1000;

struct RunFigures {
  std::string label;
  double wall_ms = 0;
  std::vector<ChatFigures> requests;  // client-major order
};

Result<RunFigures> run_clients(const ServerBenchOptions& options, bool cache_on,
                               const Observer& observer) {
  EngineConfig engine_config = options.engine;
  engine_config.prefix_cache.enabled = cache_on;
  Result<std::unique_ptr<BenchServer>> started =
      BenchServer::start(options.model_path, engine_config, options.chat_template);
  if (!started.ok()) return started.error();
  const BenchServer& server = **started;
  const Tokenizer& tokenizer = server.tokenizer();
  const std::string system = bench_text(tokenizer, options.system_len, kSystemSeed);

  RunFigures run;
  run.label = cache_on ? "cache on" : "cache off";
  Status failed;
  // Warm-up (not counted): pages the weights in; its own system prompt shares nothing.
  Result<ChatFigures> warm =
      chat_request(server.port(), chat_body(bench_text(tokenizer, 32, kWarmUpSeed), "warm up", 2));
  if (!warm.ok()) failed = warm.error();
  run.requests.resize(static_cast<size_t>(options.clients * options.requests));
  std::mutex mutex;  // guards failed, run.requests, done and the observer
  uint64_t done = 0;
  const auto n_requests = static_cast<uint64_t>(run.requests.size());
  observer.report_progress(run.label, 0, n_requests);
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> clients;
  for (int32_t c = 0; c < options.clients && failed.ok(); ++c) {
    clients.emplace_back([&, c] {
      for (int32_t i = 0; i < options.requests; ++i) {
        const auto seed = kUserSeed + static_cast<uint32_t>(c * options.requests + i);
        Result<ChatFigures> r = chat_request(
            server.port(),
            chat_body(system, bench_text(tokenizer, options.user_len, seed), options.decode_len));
        std::lock_guard<std::mutex> lock(mutex);
        if (!r.ok()) {
          failed = r.error();
          return;
        }
        run.requests[static_cast<size_t>(c * options.requests + i)] = std::move(r).value();
        observer.report_progress(run.label, ++done, n_requests);
      }
    });
  }
  for (std::thread& t : clients) t.join();
  run.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (!failed.ok()) return failed.error();
  return run;
}

json run_json(const RunFigures& run) {
  std::vector<double> ttft, latency;
  int64_t prompt = 0, cached = 0, generated = 0;
  for (const ChatFigures& r : run.requests) {
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

}  // namespace

Result<json> run_server_bench(const ServerBenchOptions& options, const Observer& observer) {
  if (options.clients <= 0 || options.requests <= 0 || options.system_len <= 0 ||
      options.user_len <= 0 || options.decode_len <= 0) {
    return Error{"--clients, --requests, --system-len, --user-len and -D must be positive"};
  }
  std::vector<RunFigures> runs;
  json rows = json::array();
  for (bool cache_on : {false, true}) {
    Result<RunFigures> run = run_clients(options, cache_on, observer);
    if (!run.ok()) return run.error();
    rows.push_back(run_json(*run));
    observer.report_row(rows.back());
    runs.push_back(std::move(run).value());
  }
  bool identical = true;
  for (size_t i = 0; i < runs[0].requests.size(); ++i)
    identical &= runs[0].requests[i].text == runs[1].requests[i].text;
  json record = {{"bench", "server"},
                 {"clients", options.clients},
                 {"requests_per_client", options.requests},
                 {"system_len", options.system_len},
                 {"user_len", options.user_len},
                 {"D", options.decode_len},
                 {"runs", rows},
                 {"outputs_identical", identical}};
  record.update(run_facts(options.model_path));
  return record;
}

CsvTable server_results_table(const json& record) {
  return csv_table(record["runs"],
                   {"run", "requests", "requests_per_s", "ttft_ms_mean", "ttft_ms_p50",
                    "ttft_ms_p99", "latency_ms_p50", "latency_ms_p99", "prompt_tokens",
                    "cached_tokens", "hit_rate", "generation_tokens_per_s", "wall_ms"});
}

}  // namespace trellis::bench
