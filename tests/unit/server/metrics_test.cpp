// Prometheus text: exact output for a small registry (counters, gauges, labels with escaping,
// histograms with cumulative buckets), value formatting, and Histogram under concurrent use.
#include "server/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "server/server_metrics.h"

namespace trellis {
namespace {

TEST(MetricsTest, FormatValue) {
  EXPECT_EQ(format_metric_value(0.0), "0");
  EXPECT_EQ(format_metric_value(42.0), "42");
  EXPECT_EQ(format_metric_value(0.25), "0.25");
  EXPECT_EQ(format_metric_value(0.1), "0.1");
  EXPECT_EQ(format_metric_value(-3.5), "-3.5");
  EXPECT_EQ(format_metric_value(1e20), "1e+20");
  EXPECT_EQ(format_metric_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_metric_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_metric_value(std::nan("")), "NaN");
}

TEST(MetricsTest, Escaping) {
  EXPECT_EQ(escape_label_value("plain"), "plain");
  EXPECT_EQ(escape_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(escape_help("say \"hi\"\\\nnext"), "say \"hi\"\\\\\\nnext");
}

TEST(MetricsTest, ExactTextOfASmallRegistry) {
  Histogram latency({0.125, 0.5, 1.0});
  for (double value : {0.0625, 0.125, 0.25, 0.75, 2.0, 0.5}) latency.observe(value);

  MetricsWriter writer;
  writer.counter("prompt_tokens_total", "Prompt tokens processed.", 1234,
                 {{"model_name", "tiny\"llama\\v1\n"}});
  writer.gauge("num_requests_running", "Requests in the running batch.", 3);
  writer.family("kv_cache_usage_perc", "Fraction of KV blocks in use.", MetricType::GAUGE);
  writer.sample({{"pool", "main"}}, 0.25);
  writer.sample({{"pool", "draft"}, {"kind", "gpu"}}, 1);
  writer.histogram("e2e_request_latency_seconds", "End-to-end latency.\nSecond line.",
                   latency.snapshot(), {{"model_name", "tiny"}});

  const std::string expected =
      "# HELP trellis:prompt_tokens_total Prompt tokens processed.\n"
      "# TYPE trellis:prompt_tokens_total counter\n"
      "trellis:prompt_tokens_total{model_name=\"tiny\\\"llama\\\\v1\\n\"} 1234\n"
      "# HELP trellis:num_requests_running Requests in the running batch.\n"
      "# TYPE trellis:num_requests_running gauge\n"
      "trellis:num_requests_running 3\n"
      "# HELP trellis:kv_cache_usage_perc Fraction of KV blocks in use.\n"
      "# TYPE trellis:kv_cache_usage_perc gauge\n"
      "trellis:kv_cache_usage_perc{pool=\"main\"} 0.25\n"
      "trellis:kv_cache_usage_perc{pool=\"draft\",kind=\"gpu\"} 1\n"
      "# HELP trellis:e2e_request_latency_seconds End-to-end latency.\\nSecond line.\n"
      "# TYPE trellis:e2e_request_latency_seconds histogram\n"
      "trellis:e2e_request_latency_seconds_bucket{model_name=\"tiny\",le=\"0.125\"} 2\n"
      "trellis:e2e_request_latency_seconds_bucket{model_name=\"tiny\",le=\"0.5\"} 4\n"
      "trellis:e2e_request_latency_seconds_bucket{model_name=\"tiny\",le=\"1\"} 5\n"
      "trellis:e2e_request_latency_seconds_bucket{model_name=\"tiny\",le=\"+Inf\"} 6\n"
      "trellis:e2e_request_latency_seconds_sum{model_name=\"tiny\"} 3.6875\n"
      "trellis:e2e_request_latency_seconds_count{model_name=\"tiny\"} 6\n";
  EXPECT_EQ(writer.text(), expected);
}

TEST(MetricsTest, HistogramWithoutLabelsAndEmpty) {
  Histogram empty({1.0, 10.0});
  MetricsWriter writer;
  writer.histogram("time_to_first_token_seconds", "TTFT.", empty.snapshot());
  EXPECT_EQ(writer.text(),
            "# HELP trellis:time_to_first_token_seconds TTFT.\n"
            "# TYPE trellis:time_to_first_token_seconds histogram\n"
            "trellis:time_to_first_token_seconds_bucket{le=\"1\"} 0\n"
            "trellis:time_to_first_token_seconds_bucket{le=\"10\"} 0\n"
            "trellis:time_to_first_token_seconds_bucket{le=\"+Inf\"} 0\n"
            "trellis:time_to_first_token_seconds_sum 0\n"
            "trellis:time_to_first_token_seconds_count 0\n");
}

TEST(ServerMetricsTest, WindowPagesAppearOnlyForAWindowedModel) {
  ServerMetrics metrics;
  EngineStats engine;
  engine.n_blocks_total = 10;
  EXPECT_EQ(metrics.render(engine).find("kv_window_pages"), std::string::npos);
  engine.n_window_pages_total = 24;
  engine.n_window_pages_held = 5;
  engine.n_window_pages_evictable = 7;
  engine.n_window_pages_evicted = 3;
  const std::string text = metrics.render(engine);
  EXPECT_NE(text.find("trellis:kv_window_pages_total 24\n"), std::string::npos) << text;
  EXPECT_NE(text.find("trellis:kv_window_pages_held 5\n"), std::string::npos);
  EXPECT_NE(text.find("trellis:kv_window_pages_evictable 7\n"), std::string::npos);
  EXPECT_NE(text.find("trellis:kv_window_pages_evicted_total 3\n"), std::string::npos);
}

TEST(HistogramTest, BucketsAreUpperInclusive) {
  Histogram histogram({1.0, 2.0});
  for (double value : {-5.0, 1.0, 1.0000001, 2.0, 2.5}) histogram.observe(value);
  const HistogramSnapshot snapshot = histogram.snapshot();
  EXPECT_EQ(snapshot.upper_bounds, (std::vector<double>{1.0, 2.0}));
  EXPECT_EQ(snapshot.bucket_counts, (std::vector<uint64_t>{2, 2, 1}));
  EXPECT_EQ(snapshot.count, 5u);
  EXPECT_DOUBLE_EQ(snapshot.sum, 1.5000001);
}

TEST(HistogramTest, NanGoesToTheInfBucket) {
  Histogram histogram({1.0});
  histogram.observe(std::nan(""));
  const HistogramSnapshot snapshot = histogram.snapshot();
  EXPECT_EQ(snapshot.bucket_counts, (std::vector<uint64_t>{0, 1}));
  EXPECT_TRUE(std::isnan(snapshot.sum));
}

TEST(HistogramTest, ConcurrentObservationsAreAllCounted) {
  Histogram histogram({0.5, 1.5});
  constexpr int kThreads = 4;
  constexpr int kPerThread = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&histogram, t] {
      // Thread t always observes t % 3: buckets 0, 1, 2, 0.
      for (int i = 0; i < kPerThread; ++i) histogram.observe(static_cast<double>(t % 3));
    });
  }
  for (std::thread& thread : threads) thread.join();
  const HistogramSnapshot snapshot = histogram.snapshot();
  EXPECT_EQ(snapshot.bucket_counts,
            (std::vector<uint64_t>{2 * kPerThread, kPerThread, kPerThread}));
  EXPECT_EQ(snapshot.count, static_cast<uint64_t>(kThreads * kPerThread));
  EXPECT_EQ(snapshot.sum, 3.0 * kPerThread);
}

}  // namespace
}  // namespace trellis
