#include "server/auth.h"

#include <cctype>
#include <cstdint>
#include <span>

#include "base/ascii.h"
#include "base/sha256.h"

namespace trellis {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<std::string> bearer_token(std::string_view authorization) {
  authorization = trim(authorization);
  const size_t space = authorization.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  if (!iequals_ascii(authorization.substr(0, space), "bearer")) return std::nullopt;
  const std::string_view token = trim(authorization.substr(space + 1));
  if (token.empty()) return std::nullopt;
  return std::string(token);
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Every byte of the longer text is visited whatever the contents; the lengths are not secret.
  const size_t n = std::max(a.size(), b.size());
  uint8_t difference = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const auto x = static_cast<uint8_t>(i < a.size() ? a[i] : 0);
    const auto y = static_cast<uint8_t>(i < b.size() ? b[i] : 0);
    difference |= static_cast<uint8_t>(x ^ y);
  }
  return difference == 0;
}

bool api_key_accepted(const std::vector<std::string>& keys, std::string_view token) {
  bool accepted = false;
  for (const std::string& key : keys) accepted |= constant_time_equal(key, token);
  return accepted;
}

std::string cache_namespace_for(CacheIsolation isolation, std::string_view api_key,
                                const std::optional<std::string>& cache_salt) {
  std::string ns;
  if (isolation == CacheIsolation::KEY) {
    Sha256 digest;
    digest.update(std::span(reinterpret_cast<const uint8_t*>(api_key.data()), api_key.size()));
    ns = "key:" + digest.finish_hex().substr(0, 32);
  }
  // The salt comes after the key part, so a salt can never spell another key's namespace.
  if (cache_salt) ns += "|salt:" + *cache_salt;
  return ns;
}

}  // namespace trellis
