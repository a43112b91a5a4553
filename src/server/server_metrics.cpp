#include "server/server_metrics.h"

#include <vector>

namespace trellis {
namespace {

// Seconds; the bounds vLLM uses for its latency histograms, which cover CPU-sized latencies too.
std::vector<double> latency_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0};
}

}  // namespace

ServerMetrics::ServerMetrics()
    : ttft_(latency_buckets()), latency_(latency_buckets()), last_scrape_(Clock::now()) {}

void ServerMetrics::record(const FinishedRequest& r) {
  prompt_tokens_ += r.prompt_tokens;
  cached_tokens_ += r.cached_tokens;
  generated_tokens_ += r.generated_tokens;
  switch (r.finish_reason) {
    case FinishReason::STOP:
      ++n_stop_;
      break;
    case FinishReason::LENGTH:
      ++n_length_;
      break;
    case FinishReason::CANCELLED:
      ++n_cancelled_;
      break;
    case FinishReason::NONE:  // a request that ended without a reason failed
    case FinishReason::ERROR:
      ++n_error_;
      break;
  }
  if (r.generated_tokens > 0) ttft_.observe(r.ttft_seconds);
  latency_.observe(r.total_seconds);
  ++n_finished_;  // last: a reader that sees the count sees the figures it covers
}

namespace {

// Per stage of a pipeline: the time a stage spends on its layers against the wall clock shows the
// bubble (what it waits for the others).
void write_stages(MetricsWriter& w, const std::vector<StageStats>& stages) {
  if (stages.empty()) return;
  auto labels = [](const StageStats& s) {
    return MetricLabels{
        {"rank", std::to_string(s.rank)},
        {"layers", std::to_string(s.layers.begin) + "-" + std::to_string(s.layers.end - 1)}};
  };
  w.family("pipeline_stage_busy_seconds_total", "Time each pipeline stage spent on its layers.",
           MetricType::COUNTER);
  for (const StageStats& s : stages) w.sample(labels(s), s.busy_s);
  w.family("pipeline_stage_sent_bytes_total",
           "Bytes each stage sent on (hidden rows, or logits from the last).", MetricType::COUNTER);
  for (const StageStats& s : stages) w.sample(labels(s), static_cast<double>(s.bytes_sent));
  w.family("pipeline_stage_steps_total", "Engine steps each stage ran.", MetricType::COUNTER);
  for (const StageStats& s : stages) w.sample(labels(s), static_cast<double>(s.n_steps));
  w.family("pipeline_stage_peak_rss_bytes", "Peak resident memory of each stage's process.",
           MetricType::GAUGE);
  for (const StageStats& s : stages) w.sample(labels(s), static_cast<double>(s.peak_rss));
}

}  // namespace

namespace {

// The prefix cache's disk tier (--cache-dir), only when there is one.
// Sliding-window layers' pages (a windowed model without --swa-full).
void write_window_pages(MetricsWriter& w, const EngineStats& e) {
  w.gauge("kv_window_pages_total", "Window pages in the pool (sliding-window layers' KV).",
          e.n_window_pages_total);
  w.gauge("kv_window_pages_held", "Window pages held by requests for their windows.",
          e.n_window_pages_held);
  w.gauge("kv_window_pages_evictable", "Window pages kept for cached prefixes.",
          e.n_window_pages_evictable);
  w.counter("kv_window_pages_evicted_total", "Cached window pages taken back for requests.",
            static_cast<double>(e.n_window_pages_evicted));
}

void write_disk_tier(MetricsWriter& w, const EngineStats& e) {
  const DiskTierStats& d = e.disk;
  const auto f = [](int64_t v) { return static_cast<double>(v); };
  w.counter("disk_cache_blocks_written_total", "KV blocks written to the disk tier.",
            f(d.n_blocks_written));
  w.counter("disk_cache_bytes_written_total", "Bytes written to the disk tier.",
            f(d.n_bytes_written));
  w.counter("disk_cache_blocks_read_total", "KV blocks read back from the disk tier.",
            f(d.n_blocks_read));
  w.counter("disk_cache_bytes_read_total", "Bytes read back from the disk tier.",
            f(d.n_bytes_read));
  w.counter("disk_cache_hits_total", "Prompt tokens loaded from the disk tier into the pool.",
            f(e.n_disk_hit_tokens));
  w.counter("disk_cache_load_seconds_total", "Time spent reading and verifying loaded blocks.",
            e.disk_load_ms / 1000.0);
  w.counter("disk_cache_loads_total", "Requests that read blocks from the disk tier.",
            f(e.n_disk_loads));
  w.counter("disk_cache_loads_staged_total",
            "Loads read into memory of their own, then copied into the pool (no blocks to spare).",
            f(e.n_disk_loads_staged));
  w.gauge("disk_cache_blocks", "KV blocks held by the disk tier.", f(d.n_blocks));
  w.gauge("disk_cache_bytes", "Bytes held by the disk tier.", f(d.n_bytes));
  w.gauge("disk_cache_budget_bytes", "The disk tier's budget (--cache-disk).", f(d.budget_bytes));
  w.gauge("disk_cache_usage_perc", "Fraction of the disk tier's budget in use (0..1).",
          d.budget_bytes > 0 ? f(d.n_bytes) / f(d.budget_bytes) : 0);
  w.gauge("disk_cache_pending_blocks", "KV blocks queued for the disk tier's writer.",
          f(d.n_pending));
  w.counter("disk_cache_blocks_evicted_total", "KV blocks evicted from the disk tier's budget.",
            f(d.n_blocks_evicted));
  w.counter("disk_cache_blocks_dropped_total",
            "KV blocks dropped: corrupt, torn or deleted on disk, or not written (queue full).",
            f(d.n_corrupt_dropped + d.n_missing_dropped + d.n_writes_dropped));
  w.counter("disk_cache_write_errors_total",
            "Block writes the disk refused (full, permissions); each is tried again later.",
            f(d.n_write_errors));
}

}  // namespace

namespace {

// Speculative decoding, by draft source: drafts verified, their tokens, and the tokens kept.
void write_speculation(MetricsWriter& w, const EngineStats& e) {
  struct Figure {
    const char* name;
    const char* help;
    int64_t DraftCounts::*field;
  };
  static constexpr Figure kFigures[] = {
      {"spec_decode_num_drafts_total", "Drafts verified by speculative decoding, by source.",
       &DraftCounts::n_drafts},
      {"spec_decode_num_draft_tokens_total", "Draft tokens verified, by source.",
       &DraftCounts::n_drafted},
      {"spec_decode_num_accepted_tokens_total",
       "Draft tokens kept (generated without a decode step of their own), by source.",
       &DraftCounts::n_accepted}};
  for (const Figure& f : kFigures) {
    w.family(f.name, f.help, MetricType::COUNTER);
    for (size_t s = 0; s < kDraftSources; ++s) {
      const std::string source(draft_source_name(static_cast<DraftSource>(s)));
      w.sample({{"source", source}}, static_cast<double>(e.drafts[s].*f.field));
    }
  }
}

}  // namespace

std::string ServerMetrics::render(const EngineStats& e, const std::vector<StageStats>& stages) {
  const auto prompt = static_cast<double>(prompt_tokens_.load());
  const auto cached = static_cast<double>(cached_tokens_.load());
  const auto finished = static_cast<double>(n_finished_.load());
  const int64_t generated = generated_tokens_.load();
  double throughput = 0;
  {
    std::lock_guard<std::mutex> lock(scrape_mutex_);
    const Clock::time_point now = Clock::now();
    const double seconds = std::chrono::duration<double>(now - last_scrape_).count();
    if (seconds > 0)
      throughput = static_cast<double>(generated - generated_at_last_scrape_) / seconds;
    last_scrape_ = now;
    generated_at_last_scrape_ = generated;
  }
  MetricsWriter w;
  w.gauge("num_requests_running", "Sequences running in the engine.", e.n_running);
  w.gauge("num_requests_waiting", "Sequences waiting for admission.", e.n_waiting);
  w.family("requests_finished_total", "Finished requests by finish reason.", MetricType::COUNTER);
  w.sample({{"finish_reason", "stop"}}, static_cast<double>(n_stop_.load()));
  w.sample({{"finish_reason", "length"}}, static_cast<double>(n_length_.load()));
  w.sample({{"finish_reason", "cancelled"}}, static_cast<double>(n_cancelled_.load()));
  w.sample({{"finish_reason", "error"}}, static_cast<double>(n_error_.load()));
  w.counter("prompt_tokens_total", "Prompt tokens of finished requests.", prompt);
  w.counter("generation_tokens_total", "Generated tokens of finished requests.",
            static_cast<double>(generated));
  w.counter("cached_prompt_tokens_total", "Prompt tokens served by the prefix cache.", cached);
  w.counter("prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.", prompt);
  w.counter("prefix_cache_hits_total", "Prompt tokens found in the prefix cache.", cached);
  w.gauge("prefix_cache_hit_rate", "Cached prompt tokens / prompt tokens since start.",
          prompt > 0 ? cached / prompt : 0);
  w.gauge("prefix_cache_mean_matched_tokens", "Cached prompt tokens per finished request.",
          finished > 0 ? cached / finished : 0);
  w.gauge("kv_blocks_total", "KV blocks in the pool.", e.n_blocks_total);
  w.gauge("kv_blocks_used", "KV blocks held by requests.", e.n_blocks_in_use);
  w.gauge("kv_blocks_cached", "KV blocks indexed by the prefix cache.", e.n_blocks_cached);
  w.gauge("kv_blocks_free", "KV blocks on the free list.", e.n_blocks_free);
  w.gauge("kv_cache_usage_perc", "Fraction of the pool's blocks not free (0..1).",
          e.n_blocks_total > 0
              ? static_cast<double>(e.n_blocks_total - e.n_blocks_free) / e.n_blocks_total
              : 0);
  w.counter("kv_blocks_evicted_total", "Cached KV blocks evicted to make room.",
            static_cast<double>(e.n_blocks_evicted));
  w.counter("num_preemptions_total", "Sequences preempted for memory.",
            static_cast<double>(e.n_preemptions));
  w.counter("grammar_forced_tokens_total",
            "Tokens of constrained replies appended by jump-forward (forced by the grammar) "
            "instead of sampled one step at a time.",
            static_cast<double>(e.n_forced_tokens));
  write_speculation(w, e);
  w.histogram("time_to_first_token_seconds", "Time to the first generated token.",
              ttft_.snapshot());
  w.histogram("e2e_request_latency_seconds", "Arrival to the end of a request.",
              latency_.snapshot());
  w.gauge("avg_generation_throughput_toks_per_s",
          "Generated tokens per second since the previous scrape.", throughput);
  write_stages(w, stages);
  if (e.n_window_pages_total > 0) write_window_pages(w, e);
  if (e.has_disk_tier) write_disk_tier(w, e);
  return w.text();
}

}  // namespace trellis
