// The server's counters and histograms, and their /metrics rendering together with the engine's
// pool and scheduler figures. Names follow what operators already chart for vLLM and SGLang:
//
//   trellis:num_requests_running / _waiting        gauges (engine sequences)
//   trellis:requests_finished_total{finish_reason}  stop | length | cancelled | error
//   trellis:prompt_tokens_total, trellis:generation_tokens_total
//   trellis:cached_prompt_tokens_total              prompt tokens served by the prefix cache
//   trellis:prefix_cache_queries_total              prompt tokens looked up (vLLM's meaning)
//   trellis:prefix_cache_hits_total                 of those, tokens found
//   trellis:prefix_cache_hit_rate                   hits / queries since start
//   trellis:prefix_cache_mean_matched_tokens        cached tokens per request since start
//   trellis:kv_blocks_total / _used / _cached / _free, trellis:kv_cache_usage_perc (0..1)
//   trellis:kv_blocks_evicted_total, trellis:num_preemptions_total
//   trellis:time_to_first_token_seconds, trellis:e2e_request_latency_seconds   histograms
//   trellis:avg_generation_throughput_toks_per_s   tokens/s since the previous scrape
//   trellis:pipeline_stage_busy_seconds_total{rank,layers}   with --pipeline: time each stage
//   trellis:pipeline_stage_sent_bytes_total{rank,layers}     spent on its layers, bytes it sent
//   trellis:pipeline_stage_steps_total, trellis:pipeline_stage_peak_rss_bytes   on, and its memory
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/metrics.h"

namespace trellis {

// What one finished HTTP request contributes (all its choices together).
struct FinishedRequest {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t generated_tokens = 0;
  double ttft_seconds = 0;                           // first token of the first choice
  double total_seconds = 0;                          // until the last choice ended
  FinishReason finish_reason = FinishReason::ERROR;  // STOP, LENGTH, CANCELLED or ERROR
};

// Thread-safe: record() from request threads, render() from the /metrics handler.
class ServerMetrics {
 public:
  ServerMetrics();

  void record(const FinishedRequest& request);
  // The exposition text of every metric above.
  std::string render(const EngineStats& engine, const std::vector<StageStats>& stages = {});

  int64_t n_finished() const { return n_finished_.load(); }
  int64_t prompt_tokens() const { return prompt_tokens_.load(); }
  int64_t cached_tokens() const { return cached_tokens_.load(); }
  int64_t generated_tokens() const { return generated_tokens_.load(); }

 private:
  using Clock = std::chrono::steady_clock;
  std::atomic<int64_t> n_finished_{0};
  std::atomic<int64_t> n_stop_{0}, n_length_{0}, n_cancelled_{0}, n_error_{0};
  std::atomic<int64_t> prompt_tokens_{0};
  std::atomic<int64_t> cached_tokens_{0};
  std::atomic<int64_t> generated_tokens_{0};
  Histogram ttft_;
  Histogram latency_;
  std::mutex scrape_mutex_;  // guards the two fields below
  Clock::time_point last_scrape_;
  int64_t generated_at_last_scrape_ = 0;
};

}  // namespace trellis
