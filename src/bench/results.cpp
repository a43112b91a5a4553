#include "bench/results.h"

#include <sys/utsname.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/sha256.h"

namespace trellis::bench {

namespace fs = std::filesystem;

nlohmann::json machine_json() {
  std::string cpu = "unknown";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) cpu = line.substr(line.find_first_not_of(" \t", colon + 1));
      break;
    }
  }
  struct utsname names {};
  const bool have_names = uname(&names) == 0;
  return {{"cpu", cpu},
          {"logical_cores", std::thread::hardware_concurrency()},
          {"os", have_names ? std::string(names.sysname) + " " + names.release : "unknown"},
          {"arch", have_names ? names.machine : "unknown"}};
}

Result<nlohmann::json> model_file_json(const std::string& path) {
  std::error_code ec;
  const uintmax_t bytes = fs::file_size(path, ec);
  if (ec) return Error{path + ": " + ec.message()};
  Result<std::string> digest = sha256_file(path);
  if (!digest.ok()) return digest.error();
  return nlohmann::json{{"path", path}, {"bytes", bytes}, {"sha256", *digest}};
}

std::string source_commit() {
#ifdef TRELLIS_GIT_COMMIT
  return TRELLIS_GIT_COMMIT;
#else
  return "unknown";
#endif
}

nlohmann::json run_facts(const std::string& model_path) {
  Result<nlohmann::json> model = model_file_json(model_path);
  return {{"machine", machine_json()},
          {"commit", source_commit()},
          {"model", model.ok() ? *model : nlohmann::json{{"path", model_path}}}};
}

Result<std::string> prepare_out_dir(const std::string& requested, const std::string& bench) {
  std::string dir = requested;
  if (dir.empty()) {
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
    dir = "bench-results/" + bench + "-" + stamp;
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Error{dir + ": cannot create the folder: " + ec.message()};
  return dir;
}

Status write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
  out.close();
  if (!out) return Error{path + ": cannot write"};
  return {};
}

Result<std::string> write_results(const std::string& requested_dir, const std::string& bench,
                                  const nlohmann::json& record, const CsvTable& table) {
  Result<std::string> dir = prepare_out_dir(requested_dir, bench);
  if (!dir.ok()) return dir.error();
  TRELLIS_TRY(write_file(*dir + "/results.json", record.dump(2) + "\n"));
  TRELLIS_TRY(write_file(*dir + "/results.csv", to_csv(table.header, table.rows)));
  return dir;
}

}  // namespace trellis::bench
