#include "grammar/json_schema_keywords.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>

namespace trellis {

namespace json_schema_keywords_impl {
namespace {

constexpr std::array<std::string_view, 10> kAnnotations = {
    "title", "description", "examples",   "default",  "$schema",
    "$id",   "$comment",    "deprecated", "readOnly", "writeOnly"};

// clang-format off
constexpr std::array<std::string_view, 22> kConstraints = {
    "type", "enum", "const", "$ref", "allOf", "anyOf", "oneOf",
    "properties", "required", "additionalProperties",
    "items", "prefixItems", "minItems", "maxItems",
    "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
// clang-format on

bool is_schema(const SchemaJson& value) {
  return value.is_object() || value.is_boolean();
}

bool is_schema_list(const SchemaJson& value, bool allow_empty) {
  if (!value.is_array() || (!allow_empty && value.empty())) return false;
  for (const SchemaJson& item : value)
    if (!is_schema(item)) return false;
  return true;
}

bool is_type_name(const SchemaJson& value) {
  if (!value.is_string()) return false;
  const std::string& name = value.get_ref<const std::string&>();
  return name == "null" || name == "boolean" || name == "object" || name == "array" ||
         name == "number" || name == "integer" || name == "string";
}

bool is_count(const SchemaJson& value) {
  if (value.is_number_unsigned()) return true;
  if (value.is_number_integer()) return value.get<int64_t>() >= 0;
  if (value.is_number_float()) {
    const double v = value.get<double>();
    return v >= 0 && v <= 9e18 && v == std::floor(v);
  }
  return false;
}

// What a keyword's value must be, or "" when it is well formed.
std::string malformed(std::string_view key, const SchemaJson& value) {
  if (key == "type") {
    if (is_type_name(value)) return "";
    if (value.is_array() && !value.empty()) {
      bool all = true;
      for (const SchemaJson& item : value) all = all && is_type_name(item);
      if (all) return "";
    }
    return "a type name or a list of type names";
  }
  if (key == "properties" || key == "$defs" || key == "definitions") {
    if (!value.is_object()) return "an object";
    for (const auto& [name, schema] : value.items())
      if (!is_schema(schema)) return "an object of schemas";
    return "";
  }
  if (key == "required") {
    if (!value.is_array()) return "a list of property names";
    for (const SchemaJson& item : value)
      if (!item.is_string()) return "a list of property names";
    return "";
  }
  if (key == "additionalProperties")
    return is_schema(value) ? "" : "a schema (an object or a boolean)";
  if (key == "items")
    return is_schema(value) || is_schema_list(value, true) ? "" : "a schema or a list of schemas";
  if (key == "prefixItems") return is_schema_list(value, true) ? "" : "a list of schemas";
  if (key == "anyOf" || key == "oneOf" || key == "allOf")
    return is_schema_list(value, false) ? "" : "a non-empty list of schemas";
  if (key == "minItems" || key == "maxItems" || key == "minLength" || key == "maxLength")
    return is_count(value) ? "" : "a non-negative integer";
  if (key == "enum") return value.is_array() ? "" : "a list";
  if (key == "$ref" || key == "pattern" || key == "format")
    return value.is_string() ? "" : "a string";
  if (key == "minimum" || key == "maximum") return value.is_number() ? "" : "a number";
  if (key == "exclusiveMinimum" || key == "exclusiveMaximum")
    return value.is_number() || value.is_boolean() ? "" : "a number";
  return "";
}

}  // namespace
}  // namespace json_schema_keywords_impl

bool is_annotation_keyword(std::string_view key) {
  using json_schema_keywords_impl::kAnnotations;
  return std::find(kAnnotations.begin(), kAnnotations.end(), key) != kAnnotations.end();
}

bool is_constraining_keyword(std::string_view key) {
  using json_schema_keywords_impl::kConstraints;
  return std::find(kConstraints.begin(), kConstraints.end(), key) != kConstraints.end();
}

Status check_schema_keywords(const SchemaJson& schema, const std::string& path) {
  for (const auto& [key, value] : schema.items()) {
    if (is_annotation_keyword(key)) continue;
    if (!is_constraining_keyword(key) && key != "$defs" && key != "definitions")
      return Error{"unsupported JSON Schema keyword '" + key + "' at " + path};
    const std::string what = json_schema_keywords_impl::malformed(key, value);
    if (!what.empty()) return Error{"'" + key + "' at " + path + " must be " + what};
  }
  return {};
}

bool has_constraints_besides(const SchemaJson& schema,
                             std::initializer_list<std::string_view> except) {
  for (const auto& [key, value] : schema.items()) {
    if (!is_constraining_keyword(key)) continue;
    if (std::find(except.begin(), except.end(), key) == except.end()) return true;
  }
  return false;
}

std::string child_path(const std::string& path, std::string_view token) {
  std::string out = path + "/";
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

int64_t count_keyword(const SchemaJson& schema, const char* key) {
  const SchemaJson& value = schema.at(key);
  if (value.is_number_float()) return static_cast<int64_t>(value.get<double>());
  if (value.is_number_unsigned()) {
    const uint64_t v = value.get<uint64_t>();
    return v > uint64_t{INT64_MAX} ? INT64_MAX : static_cast<int64_t>(v);
  }
  return value.get<int64_t>();
}

std::string compact_json(const SchemaJson& value) {
  return value.dump(-1, ' ', false, SchemaJson::error_handler_t::replace);
}

}  // namespace trellis
