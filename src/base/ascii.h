// ASCII-only text helpers (for protocol keywords and type names, never for user text).
#pragma once

#include <cctype>
#include <string_view>

namespace trellis {

// Equal ignoring ASCII letter case.
inline bool iequals_ascii(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

}  // namespace trellis
