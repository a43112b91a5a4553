#include "server/metrics.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>

namespace trellis {
namespace {

[[maybe_unused]] bool is_name_char(char c, bool first) {
  const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  return letter || (!first && c >= '0' && c <= '9');
}

// Metric names (after the prefix) may also hold ':'.
[[maybe_unused]] bool is_valid_metric_name(std::string_view name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return is_name_char(c, false) || c == ':'; });
}

[[maybe_unused]] bool is_valid_label_name(std::string_view name) {
  if (name.empty() || name == "le") return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (!is_name_char(name[i], i == 0)) return false;
  }
  return true;
}

[[maybe_unused]] bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

const char* type_name(MetricType type) {
  switch (type) {
    case MetricType::COUNTER:
      return "counter";
    case MetricType::GAUGE:
      return "gauge";
    case MetricType::HISTOGRAM:
      return "histogram";
  }
  assert(false && "unknown MetricType");
  return "untyped";
}

}  // namespace

std::string format_metric_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char text[32];  // the shortest round-trip form of a double needs at most 24 characters
  const auto result = std::to_chars(text, text + sizeof(text), value);
  assert(result.ec == std::errc());
  return std::string(text, result.ptr);
}

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string escape_help(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), bucket_counts_(upper_bounds_.size() + 1, 0) {
  for (size_t i = 0; i < upper_bounds_.size(); ++i) {
    assert(std::isfinite(upper_bounds_[i]));
    assert(i == 0 || upper_bounds_[i - 1] < upper_bounds_[i]);
  }
}

void Histogram::observe(double value) {
  // The first bound >= value; NaN compares false with every bound, so it lands in +Inf.
  const size_t bucket =
      static_cast<size_t>(std::find_if(upper_bounds_.begin(), upper_bounds_.end(),
                                       [value](double bound) { return value <= bound; }) -
                          upper_bounds_.begin());
  std::lock_guard<std::mutex> lock(mutex_);
  ++bucket_counts_[bucket];
  sum_ += value;
  ++count_;
}

HistogramSnapshot Histogram::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return HistogramSnapshot{upper_bounds_, bucket_counts_, sum_, count_};
}

void MetricsWriter::family(std::string_view name, std::string_view help, MetricType type) {
  assert(is_valid_metric_name(name));
  assert(type != MetricType::COUNTER || ends_with(name, "_total"));
  [[maybe_unused]] const bool inserted = written_names_.emplace(name).second;
  assert(inserted && "a metric family is written once");
  current_name_ = prefix_ + std::string(name);
  current_type_ = type;
  text_ += "# HELP " + current_name_ + " " + escape_help(help) + "\n";
  text_ += "# TYPE " + current_name_ + " " + type_name(type) + "\n";
}

void MetricsWriter::write_sample(std::string_view suffix, const MetricLabels& labels,
                                 const std::string* le, double value) {
  text_ += current_name_;
  text_ += suffix;
  if (!labels.empty() || le != nullptr) {
    text_ += '{';
    bool first = true;
    for (const auto& [label, label_value] : labels) {
      assert(is_valid_label_name(label));
      if (!first) text_ += ',';
      first = false;
      text_ += label + "=\"" + escape_label_value(label_value) + "\"";
    }
    if (le != nullptr) {
      if (!first) text_ += ',';
      text_ += "le=\"" + *le + "\"";
    }
    text_ += '}';
  }
  text_ += ' ';
  text_ += format_metric_value(value);
  text_ += '\n';
}

void MetricsWriter::sample(const MetricLabels& labels, double value) {
  assert(!current_name_.empty() && current_type_ != MetricType::HISTOGRAM);
  write_sample("", labels, nullptr, value);
}

void MetricsWriter::histogram_sample(const MetricLabels& labels,
                                     const HistogramSnapshot& snapshot) {
  assert(!current_name_.empty() && current_type_ == MetricType::HISTOGRAM);
  assert(snapshot.bucket_counts.size() == snapshot.upper_bounds.size() + 1);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < snapshot.bucket_counts.size(); ++i) {
    cumulative += snapshot.bucket_counts[i];
    const std::string le = i < snapshot.upper_bounds.size()
                               ? format_metric_value(snapshot.upper_bounds[i])
                               : std::string("+Inf");
    write_sample("_bucket", labels, &le, static_cast<double>(cumulative));
  }
  write_sample("_sum", labels, nullptr, snapshot.sum);
  write_sample("_count", labels, nullptr, static_cast<double>(snapshot.count));
}

void MetricsWriter::counter(std::string_view name, std::string_view help, double value,
                            const MetricLabels& labels) {
  family(name, help, MetricType::COUNTER);
  sample(labels, value);
}

void MetricsWriter::gauge(std::string_view name, std::string_view help, double value,
                          const MetricLabels& labels) {
  family(name, help, MetricType::GAUGE);
  sample(labels, value);
}

void MetricsWriter::histogram(std::string_view name, std::string_view help,
                              const HistogramSnapshot& snapshot, const MetricLabels& labels) {
  family(name, help, MetricType::HISTOGRAM);
  histogram_sample(labels, snapshot);
}

}  // namespace trellis
