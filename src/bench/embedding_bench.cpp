#include "bench/embedding_bench.h"

#include <httplib.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string_view>
#include <thread>

#include "sample/rng.h"

namespace trellis::bench {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr std::array<std::string_view, 64> kWords = {
    "the",     "model",    "server",  "cache",   "prefix",  "token",    "request",  "memory",
    "river",   "mountain", "city",    "history", "capital", "france",   "paris",    "market",
    "energy",  "solar",    "battery", "network", "protein", "cell",     "climate",  "ocean",
    "library", "reading",  "student", "teacher", "music",   "guitar",   "garden",   "winter",
    "summer",  "travel",   "railway", "bridge",  "engine",  "computer", "language", "grammar",
    "small",   "large",    "quickly", "slowly",  "bright",  "ancient",  "modern",   "public",
    "is",      "was",      "and",     "of",      "in",      "with",     "for",      "on",
    "because", "although", "between", "through", "during",  "without",  "against",  "among"};

// The parts of http://host:port.
struct Endpoint {
  std::string host;
  int port = 0;
};

Result<Endpoint> parse_url(const std::string& url) {
  std::string rest = url;
  if (rest.starts_with("http://")) rest = rest.substr(7);
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || rest.find('/') != std::string::npos) {
    return Error{"expected a server root like http://127.0.0.1:8080, got '" + url + "'"};
  }
  return Endpoint{rest.substr(0, colon), std::atoi(rest.substr(colon + 1).c_str())};
}

// The request bodies of one round.
std::vector<std::pair<std::string, std::string>> round_requests(
    const EmbeddingBenchOptions& o, const std::vector<std::string>& passages) {
  std::vector<std::pair<std::string, std::string>> out;
  if (o.rerank) {
    for (int32_t r = 0; r < o.rerank_requests; ++r) {
      std::vector<std::string> docs;
      for (int32_t d = 0; d < o.documents; ++d) {
        docs.push_back(passages[static_cast<size_t>(r * o.documents + d) % passages.size()]);
      }
      json body = {{"query", "what is the capital of france and why is paris its largest city?"},
                   {"documents", docs},
                   {"top_n", 3}};
      if (!o.model.empty()) body["model"] = o.model;
      out.emplace_back("/v1/rerank", body.dump());
    }
    return out;
  }
  for (size_t begin = 0; begin < passages.size(); begin += static_cast<size_t>(o.batch)) {
    const size_t end = std::min(passages.size(), begin + static_cast<size_t>(o.batch));
    json body = {
        {"input", std::vector<std::string>(passages.begin() + static_cast<ptrdiff_t>(begin),
                                           passages.begin() + static_cast<ptrdiff_t>(end))}};
    if (!o.model.empty()) body["model"] = o.model;
    out.emplace_back("/v1/embeddings", body.dump());
  }
  return out;
}

struct RoundFigures {
  double seconds = 0;
  int64_t prompt_tokens = 0;
  int64_t inputs = 0;
};

// Sends every request of the round through `clients` connections; the first failure is an error.
Result<RoundFigures> run_round(const Endpoint& server,
                               const std::vector<std::pair<std::string, std::string>>& requests,
                               int32_t clients, int64_t inputs_per_request_total) {
  std::atomic<size_t> next{0};
  std::atomic<int64_t> tokens{0};
  std::mutex error_mutex;
  std::string error;
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  for (int32_t c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      httplib::Client client(server.host, server.port);
      client.set_read_timeout(600, 0);
      client.set_keep_alive(true);
      for (size_t i = next++; i < requests.size(); i = next++) {
        httplib::Result r = client.Post(requests[i].first, requests[i].second, "application/json");
        const json reply = r ? json::parse(r->body, nullptr, false) : json();
        if (!r || r->status != 200 || !reply.contains("usage")) {
          std::lock_guard<std::mutex> lock(error_mutex);
          if (error.empty()) {
            error = requests[i].first + " -> " +
                    (r ? "HTTP " + std::to_string(r->status) + ": " + r->body.substr(0, 300)
                       : std::string("no response"));
          }
          return;
        }
        tokens += reply["usage"].value("prompt_tokens", int64_t{0});
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (!error.empty()) return Error{error};
  RoundFigures figures;
  figures.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  figures.prompt_tokens = tokens.load();
  figures.inputs = inputs_per_request_total;
  return figures;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

std::vector<std::string> bench_passages(int32_t passages, int32_t words, uint64_t seed) {
  uint64_t state = seed;
  std::vector<std::string> out;
  for (int32_t p = 0; p < passages; ++p) {
    std::string text;
    for (int32_t w = 0; w < words; ++w) {
      text += (w == 0 ? "" : " ") + std::string(kWords[splitmix64_next(state) % kWords.size()]);
    }
    out.push_back(text + ".");
  }
  return out;
}

Result<json> run_embedding_bench(const EmbeddingBenchOptions& o,
                                 const std::function<void(const std::string&)>& log) {
  if (o.urls.empty()) return Error{"no server to measure"};
  std::vector<Endpoint> servers;
  for (const std::string& url : o.urls) {
    Result<Endpoint> e = parse_url(url);
    if (!e.ok()) return e.error();
    servers.push_back(*e);
  }
  const int32_t n_texts = o.rerank ? o.documents * o.rerank_requests : o.passages;
  const std::vector<std::string> passages = bench_passages(n_texts, o.words, o.seed);
  const auto requests = round_requests(o, passages);
  const int64_t inputs = n_texts;
  // One warm-up request each (thread pools, pages of the weights), not counted.
  for (size_t s = 0; s < servers.size(); ++s) {
    Result<RoundFigures> warm = run_round(servers[s], {requests.front()}, 1, 0);
    if (!warm.ok()) return Error{o.urls[s] + ": " + warm.error().message};
  }
  std::vector<std::vector<RoundFigures>> figures(servers.size());
  for (int32_t round = 0; round < o.rounds; ++round) {
    for (size_t s = 0; s < servers.size(); ++s) {
      Result<RoundFigures> f = run_round(servers[s], requests, o.clients, inputs);
      if (!f.ok()) return Error{o.urls[s] + ": " + f.error().message};
      figures[s].push_back(*f);
      if (log) {
        char line[200];
        std::snprintf(line, sizeof line, "round %d %s: %.2f s, %.1f inputs/s", round + 1,
                      o.names[s].c_str(), f->seconds, static_cast<double>(inputs) / f->seconds);
        log(line);
      }
    }
  }
  json record = {{"mode", o.rerank ? "rerank" : "embed"},
                 {"inputs_per_round", inputs},
                 {"requests_per_round", requests.size()},
                 {"clients", o.clients},
                 {"words_per_text", o.words},
                 {"servers", json::array()}};
  std::vector<double> medians;
  for (size_t s = 0; s < servers.size(); ++s) {
    json rounds = json::array();
    std::vector<double> rates, token_rates;
    for (const RoundFigures& f : figures[s]) {
      rates.push_back(static_cast<double>(f.inputs) / f.seconds);
      token_rates.push_back(static_cast<double>(f.prompt_tokens) / f.seconds);
      rounds.push_back({{"seconds", f.seconds},
                        {"inputs_per_s", rates.back()},
                        {"tokens_per_s", token_rates.back()}});
    }
    medians.push_back(median(rates));
    record["servers"].push_back({{"name", o.names[s]},
                                 {"url", o.urls[s]},
                                 {"rounds", rounds},
                                 {"prompt_tokens_per_round", figures[s].front().prompt_tokens},
                                 {"median_inputs_per_s", medians.back()},
                                 {"median_tokens_per_s", median(token_rates)}});
  }
  json ratios = json::array();
  for (size_t s = 1; s < servers.size(); ++s) ratios.push_back(medians[s] / medians[0]);
  record["ratios_over_first"] = ratios;
  return record;
}

}  // namespace trellis::bench
