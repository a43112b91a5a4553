#include "bench_common.h"

#include <algorithm>
#include <cstdio>

#include "bench/results.h"

namespace trellis::cli {

bench::Observer ProgressPrinter::observer(std::function<void(const nlohmann::json&)> on_row) {
  bench::Observer observer;
  observer.progress = [this](const std::string& stage, uint64_t done, uint64_t total) {
    update(stage, done, total);
  };
  observer.row = std::move(on_row);
  return observer;
}

void ProgressPrinter::update(const std::string& stage, uint64_t done, uint64_t total) {
  if (!bar_ || stage != stage_) {
    bar_ = std::make_unique<ProgressBar>(stage, total);
    stage_ = stage;
  }
  bar_->update(done);
  if (done >= total) bar_.reset();  // finishes the line before anything else is printed
}

bool resolve_engine(EngineOptions& options, std::string& model_path, EngineConfig& engine) {
  if (options.model.empty()) {
    options.model = default_model_path();
    if (Status made = ensure_default_model(options.model); !made.ok()) {
      print_error(made.error().message);
      return false;
    }
  }
  model_path = options.model;
  Result<EngineConfig> config = options.engine_config();
  if (!config.ok()) {
    print_error(config.error().message);
    return false;
  }
  engine = *config;
  return true;
}

void print_stage_stats(const Pipeline* pipeline, double wall_s) {
  if (pipeline == nullptr) return;
  std::fprintf(stderr,
               "| stage | rank | layers | busy s | busy %% of %.1f s | steps | KiB sent/step | peak "
               "RSS MiB |\n|---|---|---|---|---|---|---|---|\n",
               wall_s);
  const std::vector<StageStats> stages = pipeline->stage_stats();
  for (size_t i = 0; i < stages.size(); ++i) {
    const StageStats& s = stages[i];
    const double steps = static_cast<double>(std::max<int64_t>(s.n_steps, 1));
    std::fprintf(stderr, "| %zu | %d | %lld-%lld%s%s | %.2f | %.0f%% | %lld | %.1f | %.1f |\n", i,
                 s.rank, static_cast<long long>(s.layers.begin),
                 static_cast<long long>(s.layers.end - 1), s.layers.first ? " +embd" : "",
                 s.layers.last ? " +head" : "", s.busy_s,
                 wall_s > 0 ? 100.0 * s.busy_s / wall_s : 0.0, static_cast<long long>(s.n_steps),
                 static_cast<double>(s.bytes_sent) / 1024.0 / steps,
                 static_cast<double>(s.peak_rss) / (1 << 20));
  }
}

nlohmann::json stage_stats_json(const Pipeline* pipeline) {
  nlohmann::json rows = nlohmann::json::array();
  if (pipeline == nullptr) return rows;
  for (const StageStats& s : pipeline->stage_stats()) {
    rows.push_back({{"rank", s.rank},
                    {"layer_begin", s.layers.begin},
                    {"layer_end", s.layers.end},
                    {"busy_s", s.busy_s},
                    {"steps", s.n_steps},
                    {"bytes_sent", s.bytes_sent},
                    {"peak_rss_bytes", s.peak_rss}});
  }
  return rows;
}

int print_error(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
}

Result<std::string> save_results(const std::string& requested_dir, const std::string& bench,
                                 const nlohmann::json& record, const bench::CsvTable& table) {
  Result<std::string> dir = bench::write_results(requested_dir, bench, record, table);
  if (!dir.ok()) {
    print_error(dir.error().message);
    return dir;
  }
  std::fprintf(stderr, "results written to %s/ (results.json, results.csv)\n", dir->c_str());
  return dir;
}

void report_plot(const Result<std::string>& png) {
  if (png.ok()) {
    std::fprintf(stderr, "plot written to %s\n", png->c_str());
  } else {
    std::fprintf(stderr, "warning: %s\n", png.error().message.c_str());
  }
}

}  // namespace trellis::cli
