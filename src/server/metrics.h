// Metrics in the Prometheus text exposition format (version 0.0.4), for GET /metrics.
//
// Each metric family is written as
//   # HELP trellis:<name> <help>
//   # TYPE trellis:<name> counter|gauge|histogram
//   trellis:<name>{label="value",...} <value>
// and a histogram sample as cumulative buckets (each counts the observations <= its bound, the
// last is le="+Inf" and equals the count), then _sum and _count:
//   trellis:<name>_bucket{...,le="0.5"} 3
//   trellis:<name>_bucket{...,le="+Inf"} 4
//   trellis:<name>_sum{...} 2.75
//   trellis:<name>_count{...} 4
// Counter names end in "_total" (so the exposed name is the one written). Values use the shortest
// decimal that reads back as the same double ("1", "0.25", "1e+20"), and +Inf, -Inf, NaN.
#pragma once

#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trellis {

// Every exposed name starts with this ("trellis:prompt_tokens_total").
inline constexpr std::string_view kMetricPrefix = "trellis:";

enum class MetricType { COUNTER, GAUGE, HISTOGRAM };

// Label name/value pairs in the order they are written. Names match [a-zA-Z_][a-zA-Z0-9_]* and are
// not "le" (a programmer error otherwise); values are any text (escaped when written).
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// A histogram's state at one moment: bucket_counts[i] counts observations in
// (upper_bounds[i-1], upper_bounds[i]] (not cumulative); the last entry, one past the bounds,
// counts those above every bound (and NaN).
struct HistogramSnapshot {
  std::vector<double> upper_bounds;
  std::vector<uint64_t> bucket_counts;  // upper_bounds.size() + 1 entries
  double sum = 0.0;
  uint64_t count = 0;  // == the sum of bucket_counts
};

// Observations into fixed buckets. Thread-safe: observe() and snapshot() take one mutex, so a
// snapshot is consistent (count, sum and buckets describe the same set of observations). The
// lock is held for a binary search and three updates; metrics are observed a few times per request
// step, far from contention.
class Histogram {
 public:
  // Preconditions (asserted): upper_bounds finite and strictly increasing; +Inf is implicit.
  explicit Histogram(std::vector<double> upper_bounds);

  // Adds `value` to the first bucket whose bound is >= value (the +Inf bucket when none is, or
  // when value is NaN, which also makes the sum NaN).
  void observe(double value);
  HistogramSnapshot snapshot() const;

 private:
  const std::vector<double> upper_bounds_;
  mutable std::mutex mutex_;
  std::vector<uint64_t> bucket_counts_;  // guarded by mutex_; upper_bounds_.size() + 1 entries
  double sum_ = 0.0;                     // guarded by mutex_
  uint64_t count_ = 0;                   // guarded by mutex_
};

// Renders metric families into exposition text. Not thread-safe: one writer per /metrics request.
// Usage: family() once per metric, then one or more samples of that family, in any number of
// families; text() at the end. Each name (without the prefix) is written at most once
// (asserted), matches [a-zA-Z_][a-zA-Z0-9_:]*, and counters end in "_total" (asserted).
class MetricsWriter {
 public:
  // `prefix` starts every exposed name ("trellis_router:" for the router).
  explicit MetricsWriter(std::string_view prefix = kMetricPrefix) : prefix_(prefix) {}

  // Writes the # HELP and # TYPE lines; the samples that follow belong to this family.
  void family(std::string_view name, std::string_view help, MetricType type);
  // A sample of the current counter or gauge family.
  void sample(const MetricLabels& labels, double value);
  // A sample of the current histogram family.
  void histogram_sample(const MetricLabels& labels, const HistogramSnapshot& snapshot);

  // One family with one sample.
  void counter(std::string_view name, std::string_view help, double value,
               const MetricLabels& labels = {});
  void gauge(std::string_view name, std::string_view help, double value,
             const MetricLabels& labels = {});
  void histogram(std::string_view name, std::string_view help, const HistogramSnapshot& snapshot,
                 const MetricLabels& labels = {});

  const std::string& text() const { return text_; }

 private:
  void write_sample(std::string_view suffix, const MetricLabels& labels, const std::string* le,
                    double value);

  std::string prefix_;
  std::string text_;
  std::string current_name_;  // with the prefix; "" before the first family()
  MetricType current_type_ = MetricType::COUNTER;
  std::set<std::string, std::less<>> written_names_;
};

// Helpers, exposed for tests and for other writers of the same format.
// The shortest decimal text that reads back as `value`; "+Inf", "-Inf", "NaN".
std::string format_metric_value(double value);
// A label value with \ " and newline escaped as \\ \" \n.
std::string escape_label_value(std::string_view value);
// HELP text with \ and newline escaped as \\ \n.
std::string escape_help(std::string_view help);

}  // namespace trellis
