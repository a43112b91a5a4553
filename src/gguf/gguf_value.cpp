#include "gguf/gguf_value.h"

#include <array>
#include <charconv>
#include <cstdio>
#include <limits>

namespace trellis {

std::string_view gguf_type_name(GgufType type) {
  static constexpr std::array<std::string_view, 13> kNames = {
      "uint8", "int8",   "uint16", "int16",  "uint32", "int32",  "float32",
      "bool",  "string", "array",  "uint64", "int64",  "float64"};
  auto index = static_cast<size_t>(type);
  return index < kNames.size() ? kNames[index] : "unknown";
}

bool GgufValue::is_integer() const {
  switch (type()) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::UINT16:
    case GgufType::INT16:
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::UINT64:
    case GgufType::INT64:
      return true;
    default:
      return false;
  }
}

bool GgufValue::is_float() const {
  return type() == GgufType::FLOAT32 || type() == GgufType::FLOAT64;
}

bool GgufValue::as_int64(int64_t* out) const {
  return std::visit(
      [out](const auto& v) -> bool {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, uint64_t>) {
          if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
          *out = static_cast<int64_t>(v);
          return true;
        } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          *out = static_cast<int64_t>(v);
          return true;
        } else {
          return false;
        }
      },
      storage);
}

double GgufValue::as_double() const {
  return std::visit(
      [](const auto& v) -> double {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_arithmetic_v<T>) {
          return static_cast<double>(v);
        } else {
          return 0.0;
        }
      },
      storage);
}

std::string GgufValue::to_display_string() const {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return v;
        } else if constexpr (std::is_same_v<T, GgufArray>) {
          // Built with append: GCC 12 warns falsely (-Wrestrict) on chained operator+.
          std::string text = "[";
          text.append(gguf_type_name(v.item_type)).append(" x ");
          text.append(std::to_string(v.items.size())).append("]");
          return text;
        } else if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_floating_point_v<T>) {
          // The shortest text that reads back as the same value (1e-05, not 9.99999975e-06).
          char buf[32];
          auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
          return ec == std::errc() ? std::string(buf, end) : std::string("?");
        } else {
          return std::to_string(v);
        }
      },
      storage);
}

namespace {
template <typename T>
GgufValue make_array(GgufType item_type, const std::vector<T>& items) {
  GgufArray array{item_type, {}};
  array.items.reserve(items.size());
  for (const T& item : items) array.items.push_back(GgufValue{item});
  return GgufValue{std::move(array)};
}
}  // namespace

GgufValue gguf_string_array(const std::vector<std::string>& items) {
  return make_array(GgufType::STRING, items);
}
GgufValue gguf_f32_array(const std::vector<float>& items) {
  return make_array(GgufType::FLOAT32, items);
}
GgufValue gguf_i32_array(const std::vector<int32_t>& items) {
  return make_array(GgufType::INT32, items);
}

}  // namespace trellis
