// Metadata values of a GGUF file: every scalar type, strings, and (nested) arrays.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace trellis {

// Values are the GGUF metadata type ids and must not change.
enum class GgufType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};

std::string_view gguf_type_name(GgufType type);

struct GgufValue;

// An array whose items all have type `item_type` (itself possibly ARRAY).
struct GgufArray {
  GgufType item_type = GgufType::UINT8;
  std::vector<GgufValue> items;
};

struct GgufValue {
  using Storage = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                               std::string, GgufArray, uint64_t, int64_t, double>;
  // The variant's alternatives are in GGUF type-id order, so index() == type id.
  Storage storage;

  GgufType type() const { return static_cast<GgufType>(storage.index()); }
  bool is_integer() const;
  bool is_float() const;
  // Numeric views; precondition: is_integer() (or is_float() for as_double, which accepts both).
  // as_int64 fails (returns false) only for a uint64 above INT64_MAX.
  bool as_int64(int64_t* out) const;
  double as_double() const;

  // Short human-readable form (arrays are summarized by type and length).
  std::string to_display_string() const;
};

// Convenience constructors for writers and tests.
GgufValue gguf_string_array(const std::vector<std::string>& items);
GgufValue gguf_f32_array(const std::vector<float>& items);
GgufValue gguf_i32_array(const std::vector<int32_t>& items);

}  // namespace trellis
