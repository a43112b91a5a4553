#include "kvdisk/tier_identity.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/sha256.h"
#include "kvdisk/block_key.h"

namespace trellis {

std::string TierIdentity::describe() const {
  std::ostringstream out;
  out << "format_version=" << kDiskFormatVersion << "\n"
      << "model_sha256=" << model_sha256 << "\n"
      << "architecture=" << architecture << "\n"
      << "kv_type=" << kv_type << "\n"
      << "block_size=" << block_size << "\n"
      << "block_bytes=" << block_bytes << "\n";
  return out.str();
}

TierDigest TierIdentity::digest() const {
  Sha256 sha;
  sha.update(describe());
  return sha.finish();
}

std::string TierIdentity::directory_name() const {
  return "tier-" + block_key_hex(digest()).substr(0, 16);
}

namespace {

// The memo's line for one file state: "<size> <mtime ns> <absolute path>".
Result<std::string> file_state(const std::string& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return Error{"cannot stat " + file};
  std::error_code ec;
  const std::string absolute = std::filesystem::absolute(file, ec).string();
  const int64_t mtime_ns =
      static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return std::to_string(st.st_size) + " " + std::to_string(mtime_ns) + " " + (ec ? file : absolute);
}

}  // namespace

Result<std::string> remembered_file_sha256(const std::string& file, const std::string& memo_path) {
  Result<std::string> state = file_state(file);
  if (!state.ok()) return state.error();
  // Memo lines: "<sha256 hex> <state>".
  std::vector<std::string> kept;
  {
    std::ifstream in(memo_path);
    std::string line;
    while (std::getline(in, line)) {
      if (line.size() > 65 && line.substr(65) == *state) return line.substr(0, 64);
      // Keep other files' lines, dropping older states of this one.
      const size_t path_at = line.find(' ', line.find(' ', 65) + 1);
      const size_t our_path_at = state->find(' ', state->find(' ') + 1);
      if (line.size() > 65 && path_at != std::string::npos &&
          line.substr(path_at) != state->substr(our_path_at))
        kept.push_back(line);
    }
  }
  Result<std::string> sha = sha256_file(file);
  if (!sha.ok()) return sha.error();
  kept.push_back(*sha + " " + *state);
  // Written whole then renamed, so a crash leaves the old memo or the new one.
  const std::string tmp = memo_path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const std::string& line : kept) out << line << "\n";
  }
  std::error_code ec;
  std::filesystem::rename(tmp, memo_path, ec);
  return sha;
}

}  // namespace trellis
