#include "test_support.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace trellis::testing {
namespace fs = std::filesystem;

std::string shared_dir() {
  if (const char* env = std::getenv("TRELLIS_SHARED_DIR")) return env;
  return fs::weakly_canonical(fs::path(TRELLIS_SHARED_DIR)).string();
}

bool have_shared_dir() {
  return fs::is_directory(shared_dir());
}

namespace {
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("trellis-test-" + std::to_string(::getpid()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};
}  // namespace

std::string temp_dir() {
  static TempDir dir;
  return dir.path.string();
}

}  // namespace trellis::testing
