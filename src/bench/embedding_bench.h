// `trellis bench embed`: embedding and rerank throughput of one or two servers over HTTP, with the
// same neutral client and the same texts, taking turns round by round so that both see the same
// machine: synthetic passages of about `words` words, sent `batch` per /v1/embeddings request by
// `clients` concurrent clients; or `documents` per /v1/rerank request for one query.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"

namespace trellis::bench {

struct EmbeddingBenchOptions {
  std::vector<std::string> urls;   // server roots (http://127.0.0.1:8080), each measured in turn
  std::vector<std::string> names;  // what to call each in the table
  bool rerank = false;
  int32_t passages = 1000;       // embed: texts per round
  int32_t words = 28;            // per passage (≈ 60 tokens of the synthetic WordPiece vocab)
  int32_t batch = 32;            // embed: inputs per request
  int32_t documents = 100;       // rerank: documents per request
  int32_t rerank_requests = 10;  // rerank: requests per round
  int32_t clients = 4;
  int32_t rounds = 3;
  std::string model;  // the "model" field sent ("" : none)
  uint64_t seed = 1;
};

// `passages` texts of about `words` words each, the same for a seed.
std::vector<std::string> bench_passages(int32_t passages, int32_t words, uint64_t seed);

// {"servers": [{"name", "url", "rounds": [{"seconds", "inputs_per_s", "tokens_per_s"}],
//   "median_inputs_per_s", "median_tokens_per_s", "prompt_tokens"}], "ratios": [...]} where each
// ratio is server i's median over server 0's. Errors name the server and the failed request.
Result<nlohmann::json> run_embedding_bench(const EmbeddingBenchOptions& options,
                                           const std::function<void(const std::string&)>& log);

}  // namespace trellis::bench
