#include "model/pooling.h"

#include <array>

namespace trellis {
namespace {

constexpr std::array<std::string_view, 5> kNames = {"none", "mean", "cls", "last", "rank"};

}  // namespace

std::string_view pooling_name(Pooling pooling) {
  return kNames[static_cast<size_t>(pooling)];
}

std::optional<Pooling> pooling_from_name(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<Pooling>(i);
  }
  return std::nullopt;
}

std::optional<Pooling> pooling_from_code(int64_t code) {
  if (code < 0 || code >= static_cast<int64_t>(kNames.size())) return std::nullopt;
  return static_cast<Pooling>(code);
}

}  // namespace trellis
