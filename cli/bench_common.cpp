#include "bench_common.h"

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
  if (options.model.empty()) options.model = default_model_path();
  model_path = options.model;
  Result<EngineConfig> config = options.engine_config();
  if (!config.ok()) {
    print_error(config.error().message);
    return false;
  }
  engine = *config;
  return true;
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
