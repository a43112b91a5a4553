// Reading a request's JSON body field by field, with errors as the OpenAI API reports them: the
// parse itself (depth-limited, so hostile nesting cannot exhaust the stack) and typed reads that
// keep the first error, naming the field.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "server/api_error.h"

namespace trellis {

// Ordered: a JSON schema's properties keep the order the client wrote them in (the order the
// constrained reply writes them in).
using OrderedJson = nlohmann::ordered_json;

inline constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// "a string", "an object", ...: the JSON type of a value for error messages.
std::string a_type(const OrderedJson& value);

// The body as a JSON object, or a 400 saying why not (not JSON, nested deeper than max_depth,
// not an object).
ApiResult<OrderedJson> parse_body(std::string_view body, int32_t max_depth);

// Reads typed fields of JSON objects and keeps the first error. After an error every read returns
// nullopt, so a parse function reads all its fields, then checks failed() once (and again before
// any check that combines fields). A field that is missing or null reads as nullopt.
class FieldReader {
  // 2^63 and 2^64 as doubles (both exact): the bounds of integral floats that fit int64 / uint64.
  static constexpr double kTwoPow63 = 9223372036854775808.0;
  static constexpr double kTwoPow64 = 18446744073709551616.0;

 public:
  bool failed() const { return error_.has_value(); }
  ApiError take_error() { return std::move(*error_); }

  // Records an error unless an earlier one is already recorded.
  void fail(std::string message, std::string param) {
    if (!error_) error_ = invalid_request_error(std::move(message), std::move(param));
  }

  // The field `key` of `object`, or nullptr when missing or null (or after an error).
  const OrderedJson* find(const OrderedJson& object, const char* key) const {
    if (error_) return nullptr;
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) return nullptr;
    return &*it;
  }

  // `path` is the field's full name for messages and param ("stream_options.include_usage").
  std::optional<bool> boolean(const OrderedJson& object, const char* key, const std::string& path) {
    const OrderedJson* value = find(object, key);
    if (value == nullptr) return std::nullopt;
    if (!value->is_boolean()) return type_error(path, "a boolean", *value);
    return value->get<bool>();
  }
  std::optional<bool> boolean(const OrderedJson& object, const char* key) {
    return boolean(object, key, key);
  }

  std::optional<std::string> string(const OrderedJson& object, const char* key,
                                    const std::string& path) {
    const OrderedJson* value = find(object, key);
    if (value == nullptr) return std::nullopt;
    if (!value->is_string()) return type_error(path, "a string", *value);
    return value->get<std::string>();
  }
  std::optional<std::string> string(const OrderedJson& object, const char* key) {
    return string(object, key, key);
  }

  // Any JSON number (integers included), narrowed to float. Values beyond float's range become
  // +-inf, which the range checks of SamplingParams::validate() reject.
  std::optional<float> number(const OrderedJson& object, const char* key) {
    const OrderedJson* value = find(object, key);
    if (value == nullptr) return std::nullopt;
    if (!value->is_number()) return type_error(key, "a number", *value);
    return static_cast<float>(value->get<double>());
  }

  // An integer in [min, max]; JSON floats with an integral value count as integers.
  std::optional<int64_t> integer_value(const OrderedJson& value, const std::string& path,
                                       int64_t min, int64_t max) {
    if (error_) return std::nullopt;
    std::optional<int64_t> result;
    bool in_int64 = true;
    if (value.is_number_unsigned()) {
      const uint64_t raw = value.get<uint64_t>();
      in_int64 = raw <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
      if (in_int64) result = static_cast<int64_t>(raw);
    } else if (value.is_number_integer()) {
      result = value.get<int64_t>();
    } else if (value.is_number_float()) {
      const double raw = value.get<double>();
      if (std::trunc(raw) != raw) return type_error(path, "an integer", value);
      in_int64 = raw >= -kTwoPow63 && raw < kTwoPow63;
      if (in_int64) result = static_cast<int64_t>(raw);
    } else {
      return type_error(path, "an integer", value);
    }
    if (!in_int64 || *result < min || *result > max) {
      fail(path + " must be in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " +
               value.dump(),
           path);
      return std::nullopt;
    }
    return result;
  }
  std::optional<int64_t> integer(const OrderedJson& object, const char* key, int64_t min,
                                 int64_t max) {
    const OrderedJson* value = find(object, key);
    if (value == nullptr) return std::nullopt;
    return integer_value(*value, key, min, max);
  }

  // Any integer from INT64_MIN to UINT64_MAX; negative values wrap modulo 2^64.
  std::optional<uint64_t> seed(const OrderedJson& object, const char* key) {
    const OrderedJson* value = find(object, key);
    if (value == nullptr) return std::nullopt;
    if (value->is_number_unsigned()) return value->get<uint64_t>();
    if (value->is_number_integer()) return static_cast<uint64_t>(value->get<int64_t>());
    if (value->is_number_float()) {
      const double raw = value->get<double>();
      if (std::trunc(raw) != raw) return type_error(key, "an integer", *value);
      if (raw >= 0.0 && raw < kTwoPow64) return static_cast<uint64_t>(raw);
      if (raw < 0.0 && raw >= -kTwoPow63) {
        return static_cast<uint64_t>(static_cast<int64_t>(raw));
      }
      fail(std::string(key) + " must be an integer in [-2^63, 2^64), got " + value->dump(), key);
      return std::nullopt;
    }
    return type_error(key, "an integer", *value);
  }

  // Records "<path> must be <expected>, got <type>" and returns nullopt (of any optional type).
  std::nullopt_t type_error(const std::string& path, const char* expected,
                            const OrderedJson& value) {
    fail(path + " must be " + expected + ", got " + a_type(value), path);
    return std::nullopt;
  }

 private:
  std::optional<ApiError> error_;
};

}  // namespace trellis
